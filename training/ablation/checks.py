"""The checks of the Table 5 comparison's settings (`training.ablations`),
made before anything is written: each flag's value (`check_flags`), and a
resumed folder's `settings.json` against the settings now
(`_check_settings`).
"""

import dataclasses
import json
import os

from tf_records.input_files import check_output_folder
from training.ablation.settings import chosen_systems
from training.ablation.settings import learning_rates
from training.ablation.tasks import span_qa_supply
from training.run.config_flags import check_at_least


def check_flags(cfg):
    """`SystemExit` naming the first flag whose value cannot make a
    comparison; run before anything is written."""
    check_at_least(cfg, {
        "pretrain_steps": 1, "pretrain_batch_size": 1, "pretrain_seq_length": 2,
        "pretrain_warmup_steps": 0, "vocab_size": 1, "num_train": 1, "num_validation": 1,
        "num_dev": 1, "seeds": 1, "batch_size": 1, "workers": 1, "extend_grid": 0})
    if cfg.pretrain_seq_length < 16:
        raise SystemExit(f"--pretrain_seq_length={cfg.pretrain_seq_length}: BERT's segment "
                         "pairs need at least 16 tokens.")
    if not cfg.pretrain_learning_rate > 0:
        raise SystemExit(f"--pretrain_learning_rate={cfg.pretrain_learning_rate!r}: must be > 0.")
    if cfg.span_qa_num_train < cfg.num_train:
        raise SystemExit(f"--span_qa_num_train={cfg.span_qa_num_train}: at least --num_train "
                         f"({cfg.num_train}): span QA's rows are the others' and more.")
    learning_rates(cfg)
    chosen_systems(cfg)
    if cfg.pretrain_seq_length > GPT_POSITIONS:
        raise SystemExit(
            f"--pretrain_seq_length={cfg.pretrain_seq_length}: OpenAI GPT's size here (gpt_tiny) "
            f"has {GPT_POSITIONS} positions, and every system pretrains alike: give at most "
            f"{GPT_POSITIONS}.")
    check_output_folder(cfg.output_dir, marks=("settings.json", "tasks"))
    if cfg.span_qa_num_train > cfg.num_train:  # last: it draws span QA's rows (about a second)
        supply = span_qa_supply(cfg.num_train, cfg.num_validation)
        if cfg.span_qa_num_train > supply:
            raise SystemExit(
                f"--span_qa_num_train={cfg.span_qa_num_train}: the default corpus holds "
                f"{supply} usable span-QA training questions with --num_train={cfg.num_train} "
                f"and --num_validation={cfg.num_validation}; ask for at most {supply}.")


GPT_POSITIONS = 128  # gpt_tiny's n_positions: the longest window GPT's pretraining takes
# Neither changes a result: a folder resumes with other values.
_FREE_SETTINGS = ("output_dir", "workers", "scaling", "systems")
# Settings added after folders were made: what a folder without one ran with
# (a callable: from the folder's other settings).
_BEFORE_THE_SETTING = {"extend_grid": 0,
                       "span_qa_num_train": lambda saved: saved.get("num_train")}


def _check_settings(cfg):
    """A folder holds one comparison: other settings would mix results.
    Returns the settings to write (a new folder), or None (the same as
    the folder's)."""
    path = os.path.join(cfg.output_dir, "settings.json")
    mine = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in _FREE_SETTINGS}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        saved = {**{k: v(saved) if callable(v) else v for k, v in _BEFORE_THE_SETTING.items()},
                 **saved}
        changed = {k: (saved.get(k), v) for k, v in mine.items() if saved.get(k) != v}
        if changed:
            shown = ", ".join(f"--{k}: {a!r} there, {b!r} now" for k, (a, b) in changed.items())
            raise SystemExit(f"{cfg.output_dir} holds a comparison with other settings ({shown}). "
                             "Use the same settings to resume, or another --output_dir.")
        return None
    return mine

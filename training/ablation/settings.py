"""The settings of the Table 5 comparison (`training.ablations`):
`AblationsConfig` (every flag a field, the pre-registered run's values its
defaults), the flags' help, what `--quick` shrinks, ELMo's share of the
tokens, each pretraining run (`PRETRAININGS`), the learning-rate grid and
the systems `--systems` names. The checks made before anything is written
are `training.ablation.checks`.
"""

import dataclasses
import math
import typing

from training.ablation.systems import SYSTEMS
from training.ablation.table import TABLE1_SYSTEMS
from training.ablation.table import TABLE5_SYSTEMS


@dataclasses.dataclass(frozen=True)
class AblationsConfig:
    """Settings of the comparison; the defaults are the pre-registered run's."""

    output_dir: str = "ablations_output"
    quick: bool = False
    scaling: bool = False
    systems: str = "table5"
    pretrain_steps: int = 6000
    pretrain_batch_size: int = 32
    pretrain_seq_length: int = 128
    pretrain_learning_rate: float = 2e-3
    pretrain_warmup_steps: int = 600
    vocab_size: int = 4000
    num_train: int = 2500
    span_qa_num_train: int = 9000
    num_validation: int = 500
    num_dev: int = 400
    seeds: int = 5
    learning_rates: str = "1e-4,3e-4,1e-3"
    extend_grid: int = 2
    batch_size: int = 32
    seed: int = 12345
    workers: int = 2


HELP = {
    "output_dir": "Run folder: corpus, pretraining, tasks, fine-tuning runs, table5.json/png, "
                  "table1.json/png, scaling/.",
    "quick": "Smoke run: the flags below not typed on the command line become tiny (20 "
             "pretraining steps on 150 documents, 48 training rows, 1 seed, 1 epoch, one "
             "learning rate, so no selection runs) and --systems all.",
    "scaling": "Run the next scaling stage (BERT, No NSP and LTR pretrained for 1/4, then 1/2 "
               "of --pretrain_steps; the full budget is the default run's) and redraw "
               "scaling.png from every stage present in <output_dir>/scaling/.",
    "systems": "Systems to run, comma-separated: table5 (Table 5's: "
               + ", ".join(TABLE5_SYSTEMS) + "), table1 (Table 1's: "
               + ", ".join(TABLE1_SYSTEMS) + "), all, or names. Runs done in the folder "
               "before, by any --systems, are read into the tables, not run again.",
    "pretrain_steps": "Pretraining steps of every system (ELMo: 1/8 of their tokens, in its "
                      "64 windows of 20 tokens per step).",
    "pretrain_batch_size": "Pretraining sequences per step.",
    "pretrain_seq_length": "Pretraining tokens per sequence (GPT: per window).",
    "pretrain_learning_rate": "Peak pretraining learning rate (not ELMo's: bilm-tf's Adagrad "
                              "0.2).",
    "pretrain_warmup_steps": "Linear warmup, then linear decay to 0 at the last step.",
    "vocab_size": "Size of the learned vocabularies (WordPiece, BPE, SentencePiece).",
    "num_train": "Training rows (questions) of each task but span QA.",
    "span_qa_num_train": "Span QA's training rows: the first --num_train as the other tasks', "
                         "then those drawn after its validation rows (at least --num_train).",
    "num_validation": "Validation rows of each task (from training documents): the learning "
                      "rate is chosen on them.",
    "num_dev": "Dev rows (questions) of each task, from documents held out of pretraining.",
    "seeds": "Fine-tuning seeds per system and task, scored on dev (indices 0 .. seeds - 1; "
             "the learning-rate selection runs seed index --seeds).",
    "learning_rates": "The fine-tuning learning-rate grid, comma-separated; each system's "
                      "rate per task is the one with the best validation score.",
    "extend_grid": "Rates tried beyond the grid's ends: while a cell's best validation rate is "
                   "the highest (lowest) tried, the next rate of the 1-3 sequence above (below) "
                   "it is tried too, at most this many times each way. 0: the grid as typed; a "
                   "grid of one rate is never extended.",
    "batch_size": "Fine-tuning batch size.",
    "seed": "Pretraining seed; fine-tuning seed index k is seed + 1 + k.",
    "workers": "Worker processes for the pretraining and fine-tuning runs. 1: every run "
               "in this process, one after the other.",
}

# What --quick changes, where the flag was left at its default.
QUICK = {"pretrain_steps": 20, "pretrain_batch_size": 8, "pretrain_seq_length": 64,
         "pretrain_warmup_steps": 2, "vocab_size": 1000, "num_train": 48, "span_qa_num_train": 48,
         "num_validation": 16, "num_dev": 24, "seeds": 1, "learning_rates": "1e-3",
         "systems": "all"}
QUICK_DOCUMENTS = 150  # training documents of the quick run's corpus
# Held-out documents of the quick run's corpus: each system's held-out report
# reads them all, which on the whole 15% took longer than its 20 steps.
QUICK_HELDOUT_DOCUMENTS = 60
QUICK_EPOCHS = 1
ELMO_WINDOW = 20  # bilm-tf's unroll_steps: ELMo's tokens per row
ELMO_BATCH = 64
# ELMo's LSTMs read about 5,000 tokens/s on 2 cores here, BERT's encoder about
# 40,000: the same tokens would take ELMo 3 hours. It gets this share of them.
ELMO_TOKEN_SHARE = 8


def elmo_steps(cfg):
    """ELMo's pretraining steps: 1/ELMO_TOKEN_SHARE of the others' tokens."""
    tokens = cfg.pretrain_steps * cfg.pretrain_batch_size * cfg.pretrain_seq_length
    return max(1, tokens // (ELMO_TOKEN_SHARE * ELMO_BATCH * ELMO_WINDOW))


def _bert_records(cfg):
    return {"dupe_factor": 1 if cfg.quick else 10, "fill_mask_examples": 0}


def _elmo_budget(cfg):
    """1/ELMO_TOKEN_SHARE of the others' tokens, in bilm-tf's windows, with
    ELMo's own optimizer (no learning rate or warmup of the shared schedule)."""
    return {"num_train_steps": elmo_steps(cfg), "global_batch_size": ELMO_BATCH,
            "max_seq_length": ELMO_WINDOW, "learning_rate": None, "warmup_steps": None}


def _xlnet_predictions(cfg):
    """As many predictions per sequence as BERT's: 15% of the length."""
    return {"max_predictions_per_seq": max(1, round(0.15 * cfg.pretrain_seq_length))}


@dataclasses.dataclass(frozen=True)
class Pretraining:
    """A folder of `<output_dir>/pretrain/`: the `training.pretrain` run the
    systems start from. `records_from`: the run whose records and
    vocabulary it reads ("" = it writes its own from the corpus, the same
    text for all); `flags(cfg)`: its own flags over the shared ones (None:
    the flag is left out)."""

    name: str
    model: str
    ablation: str = ""
    records_from: str = ""
    flags: typing.Callable = lambda cfg: {}


PRETRAININGS = (
    Pretraining("bert", "bert", flags=_bert_records),
    Pretraining("no_nsp", "bert", "no_nsp", records_from="bert", flags=_bert_records),
    Pretraining("ltr", "bert", "ltr", records_from="bert", flags=_bert_records),
    Pretraining("gpt", "gpt"),
    Pretraining("elmo", "elmo", flags=_elmo_budget),
    Pretraining("xlnet", "xlnet", flags=_xlnet_predictions),
)
PRETRAINED = tuple(p.name for p in PRETRAININGS)  # folders of pretrain/


def learning_rates(cfg):
    try:
        rates = [float(r) for r in cfg.learning_rates.split(",")]
    except ValueError:
        raise SystemExit(f"--learning_rates={cfg.learning_rates!r}: comma-separated numbers, "
                         "e.g. 1e-4,3e-4,1e-3.") from None
    if not rates or any(not r > 0 for r in rates):
        raise SystemExit(f"--learning_rates={cfg.learning_rates!r}: every rate must be > 0.")
    return rates


def beyond_grid(rates, tried, best, limit):
    """The next rate to try for a cell whose best validation rate so far is
    `best`, or None: when `best` is the highest (lowest) of `tried`, the
    next rate of the 1-3 sequence (..., 1e-4, 3e-4, 1e-3, ...) above
    (below) it, as long as fewer than `limit` rates were added beyond
    that end of the grid `rates`. A grid of one rate is never extended."""
    if len(rates) < 2:
        return None
    if best >= max(tried):
        added, up = sum(r > max(rates) for r in tried), True
    elif best <= min(tried):
        added, up = sum(r < min(rates) for r in tried), False
    else:
        return None
    if added >= limit:
        return None
    exponent = math.floor(math.log10(best))
    sequence = [m * 10.0 ** e for e in range(exponent - 2, exponent + 3) for m in (1, 3)]
    sequence = [float(f"{r:.0e}") for r in sequence]
    if up:
        return min(r for r in sequence if r > best * 1.5)
    return max(r for r in sequence if r < best / 1.5)


GROUPS = {"table5": TABLE5_SYSTEMS, "table1": TABLE1_SYSTEMS,
          "all": tuple(s.name for s in SYSTEMS)}


def chosen_systems(cfg):
    """The systems `--systems` names (groups expanded), in the tables' order."""
    names = set()
    for name in (n.strip() for n in cfg.systems.split(",")):
        names.update(GROUPS.get(name, (name,) if name else ()))
    known = {s.name: s for s in SYSTEMS}
    unknown = sorted(n for n in names if n not in known)
    if unknown or not names:
        raise SystemExit(f"--systems={cfg.systems!r}: {', '.join(map(repr, unknown)) or 'empty'}"
                         f" not one of {', '.join((*GROUPS, *known))}.")
    return tuple(s for s in SYSTEMS if s.name in names)

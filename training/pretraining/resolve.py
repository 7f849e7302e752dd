"""The pretraining command's one pass from flags to the run's final config:
the step count, the model family's defaults, the checkpoint continued from,
the flag checks, the records' agreement and the precision. `--input`'s and
`--heldout_input`'s manifests are read once, here, and handed to the
checks and to the run. Everything after it reads the config it returns and
changes nothing in it."""

import dataclasses

from training.pretraining.checks import agree_with_records
from training.pretraining.checks import check_bare_records
from training.pretraining.checks import check_flags
from training.pretraining.checks import export_choice
from training.pretraining.checks import read_records_manifests
from training.pretraining.common import is_tfrecords
from training.pretraining.common import say
from training.pretraining.config import DEFAULT_TRAIN_STEPS
from training.pretraining.config import MODEL_DEFAULTS
from training.pretraining.config import PretrainConfig
from training.pretraining.config import with_model_defaults
from training.pretraining.continued import with_init_checkpoint
from training.pretraining.run_config import unset_mixed_precision

PHASE2_FLAGS = ("phase2_max_seq_length", "phase2_max_predictions_per_seq")


@dataclasses.dataclass(frozen=True)
class Resolved:
    """The run's final config, the `InitCheckpoint` it continues from (or
    None), the flags typed with their values (None: not known), and the
    manifests of the records `--input` and `--heldout_input` name
    ({path as typed: manifest}; none for text or a glob)."""
    cfg: PretrainConfig
    init: object
    typed: dict | None
    manifests: dict = dataclasses.field(default_factory=dict)


def resolve(cfg, explicit=None):
    """-> `Resolved`; `SystemExit` naming the flag, path or record at fault.
    `explicit`: the flags given on the command line (a flag not given takes
    the family's default, the checkpoint's and the records' value); None:
    those whose value differs from the default."""
    typed = {k: getattr(cfg, k) for k in sorted(explicit)} if explicit is not None else None
    if not cfg.num_train_steps:
        cfg = dataclasses.replace(cfg, num_train_steps=DEFAULT_TRAIN_STEPS.get(cfg.model, 3000))
    defaults = with_model_defaults(PretrainConfig(model=cfg.model))
    cfg, explicit = _family_defaults(cfg, explicit, defaults)
    # Read once, here; one that cannot be read is refused by the first check that asks for it.
    manifests = read_records_manifests(cfg)
    init = None
    if cfg.init_checkpoint:
        cfg, init = with_init_checkpoint(cfg, explicit, manifests)
        explicit |= {"vocab_file", "do_lower_case"}  # the checkpoint's: records must agree
    check_flags(cfg, manifests)
    cfg = export_choice(cfg, explicit)
    cfg = agree_with_records(cfg, defaults, explicit, manifests)
    for source in (cfg.input, cfg.heldout_input):  # a glob's records: the flags' lengths
        if is_tfrecords(source):
            check_bare_records(cfg, source)
    if cfg.mixed_precision is None:
        cfg = dataclasses.replace(cfg, mixed_precision=unset_mixed_precision(cfg))
    return Resolved(cfg, init, typed, manifests)


def _family_defaults(cfg, explicit, defaults):
    """(`cfg` with its family's defaults for the flags not typed, said in a
    line each; the set of flags typed). `defaults`: the family's config with
    no flag given."""
    family = with_model_defaults(cfg, explicit)
    for key in sorted(k for k in MODEL_DEFAULTS.get(cfg.model, {})
                      if getattr(family, k) != getattr(cfg, k)):
        say(f"--{key}: {getattr(family, key)!r}, --model={cfg.model}'s default (the flag's "
            f"is {getattr(cfg, key)!r}; type it to choose).")
    explicit = set(explicit) if explicit is not None else {
        f.name for f in dataclasses.fields(family)
        if getattr(family, f.name) != getattr(defaults, f.name)}
    typed_phase2 = sorted(explicit & set(PHASE2_FLAGS))
    if typed_phase2 and not family.phase2_steps:
        raise SystemExit(f"--{typed_phase2[0]} is a setting of phase 2: give --phase2_steps too.")
    return family, explicit

"""absl flags generated from dataclass fields: one flag per field, the
field's default as the flag's, and back to a dataclass instance.

The dataclass is the one place a setting and its default live; the command
line only overrides it.
"""

import dataclasses
import importlib
import types
import typing

from absl import flags

# `bool | None`: a bool flag whose default None means "not given: decide
# at run time" (`--x` sets True, `--nox` False).
_DEFINE = {bool: flags.DEFINE_bool, bool | None: flags.DEFINE_bool, int: flags.DEFINE_integer,
           float: flags.DEFINE_float, str: flags.DEFINE_string}


def define_flags(cls, help_texts, flag_values=flags.FLAGS):
    """Defines `--<field>` for every field of dataclass `cls` in `flag_values`.

    `help_texts` maps field name -> help; a field without one is an error
    (every flag says what it does).
    """
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        kind = hints[field.name]
        if kind not in _DEFINE:
            raise TypeError(f"{cls.__name__}.{field.name}: no flag type for {kind}.")
        if field.name not in help_texts:
            raise ValueError(f"{cls.__name__}.{field.name} has no help text.")
        _DEFINE[kind](field.name, field.default, help_texts[field.name], flag_values=flag_values)


def from_flags(cls, flag_values=flags.FLAGS):
    """An instance of `cls` with every field taken from the parsed flags."""
    return cls(**{f.name: flag_values[f.name].value for f in dataclasses.fields(cls)})


def check_at_least(cfg, minimums):
    """`SystemExit` naming the first flag of `minimums` ({field: lowest
    allowed value}) whose value in `cfg` is below it: flags are checked
    before a command writes anything."""
    for name, lowest in minimums.items():
        value = getattr(cfg, name)
        if value < lowest:
            raise SystemExit(f"--{name}={value}: must be >= {lowest}.")


def check_one_of(cfg, name, choices):
    """`SystemExit` naming `--name` unless its value in `cfg` is one of `choices`."""
    value = getattr(cfg, name)
    if value not in choices:
        raise SystemExit(f"--{name}={value!r} is not one of: {', '.join(map(str, choices))}.")


def flag_values(owner, names, values):
    """`values` as attributes (`.max_seq_length`): the plain values a recipe
    holds. `TypeError` unless they are exactly the flags `names` (`owner`:
    the class, named in the message)."""
    missing = sorted(set(names) - set(values))
    extra = sorted(set(values) - set(names))
    if missing or extra:
        raise TypeError(f"{owner} takes the flags {list(names)}; missing {missing}, "
                        f"unknown {extra}.")
    return types.SimpleNamespace(**values)


def family_recipe(families, model):
    """The `RECIPE` of the module `families[model]` names (imported only when
    chosen: a family's module imports Keras and its own models); `SystemExit`
    naming `--model` for a name not in `families`. Pretraining's and
    fine-tuning's registries both pick their recipe with it."""
    if model not in families:
        raise SystemExit(f"--model={model!r} is not one of: {', '.join(families)}.")
    return importlib.import_module(families[model]).RECIPE

"""The recipes hold plain values: each class names the flags it reads
(`flags`), each a field of its command's config, and is built from exactly
those (`training.run.config_flags.flag_values`); every `self.flag.<name>`
a recipe module reads is one it names."""

import dataclasses
import importlib
import re

import pytest

from training.finetuning.config import FinetuneConfig
from training.pretraining.config import PretrainConfig
from training.run.config_flags import flag_values

FAMILIES = ("bert", "gpt", "elmo", "xlnet")


@pytest.mark.parametrize("module, config", [
    *((f"training.{family}.recipe", PretrainConfig) for family in FAMILIES),
    *((f"training.{family}.finetune", FinetuneConfig) for family in FAMILIES)])
def test_a_recipe_names_config_fields_and_reads_only_those(module, config):
    loaded = importlib.import_module(module)
    recipe = loaded.RECIPE
    fields = {f.name for f in dataclasses.fields(config)}
    assert set(recipe.flags) <= fields, set(recipe.flags) - fields
    assert len(set(recipe.flags)) == len(recipe.flags)
    with open(loaded.__file__, encoding="utf-8") as f:
        read = set(re.findall(r"\bflag\.([a-z_]+)", f.read()))
    assert read and read <= set(recipe.flags), read - set(recipe.flags)


def test_flag_values_refuse_a_missing_or_unknown_flag():
    assert flag_values("R", ("seed",), {"seed": 3}).seed == 3
    with pytest.raises(TypeError, match=r"R takes the flags \['seed'\]; missing \['seed'\], "
                                        r"unknown \['sead'\]"):
        flag_values("R", ("seed",), {"sead": 3})

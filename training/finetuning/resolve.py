"""The fine-tuning command's one pass from flags to the run's final config
(`resolve_run`): the family's casing, the flag checks, the task's and
family's defaults, the checkpoint and vocabulary located (`resolve`), and
the paths checked. Everything after it reads the config it returns and
changes nothing in it."""

import dataclasses

from keras_bert_impl.checkpoints.hub_names import resolve_checkpoint
from keras_bert_impl.runtimes.formats import check_family_formats
from training.finetuning.checks import check_flags
from training.finetuning.checks import check_paths
from training.finetuning.recipe import finetune_recipe
from training.finetuning.text_classification import check_flags as check_text_classification

ABLATIONS = ("", "ltr", "ltr_bilstm", "features")


def say(message):
    print(message, flush=True)


def resolve_run(cfg, explicit=None):
    """-> (the run's final `FinetuneConfig`, its family's `FinetuneRecipe`
    holding the values of its flags: `recipe_for`);
    `SystemExit` naming the flag or path at fault. `explicit`: the flags
    given on the command line (a cased family's `do_lower_case` is off
    unless given); None: `cfg` as it is."""
    if explicit is not None and finetune_recipe(cfg.model).cased and (
            "do_lower_case" not in explicit):
        cfg = dataclasses.replace(cfg, do_lower_case=False)
    check_flags(cfg)
    cfg = resolve(cfg)
    recipe = recipe_for(cfg)
    check_paths(cfg, recipe)
    return cfg, recipe


def recipe_for(cfg):
    """The `FinetuneRecipe` of `cfg.model`, built from the resolved values of
    the flags its class names (`flags`): what the run's steps call."""
    family = finetune_recipe(cfg.model)
    return family(**{name: getattr(cfg, name) for name in family.flags})


def with_checkpoint_by_name(cfg, recipe=None):
    """`cfg` with a Hub repository id in `--init_checkpoint` (e.g.
    bert-base-uncased) replaced by its folder in the Hugging Face cache, the
    change printed; paths stay as typed. ELMo's checkpoints are not on the
    Hub (its recipe says so: `hub_checkpoints`)."""
    if recipe is None:
        recipe = finetune_recipe(cfg.model)
    if not cfg.init_checkpoint or not recipe.hub_checkpoints:
        return cfg
    try:
        folder = resolve_checkpoint(cfg.init_checkpoint)
    except ValueError as e:
        raise SystemExit(f"--init_checkpoint: {e}") from None
    if folder != cfg.init_checkpoint:
        say(f"--init_checkpoint={cfg.init_checkpoint}: the Hub's files in {folder}")
    return dataclasses.replace(cfg, init_checkpoint=folder)


def resolve(cfg):
    """Task defaults filled in; checkpoint and vocabulary located: the
    checks every family shares, then the family's recipe
    (`training.finetuning.recipe`)."""
    recipe = finetune_recipe(cfg.model)
    cfg = with_checkpoint_by_name(cfg, recipe)
    if cfg.task == "text_classification":  # your own files instead of a --data_dir
        if cfg.validation_data_dir:
            raise SystemExit("--validation_data_dir is read by the tasks of a --data_dir; "
                             "--task=text_classification scores its --dev_file each epoch "
                             "(early stopping watches it).")
        check_text_classification(cfg)
    elif cfg.train_file or cfg.dev_file or cfg.test_file:
        raise SystemExit("--train_file, --dev_file and --test_file are read by "
                         "--task=text_classification; the other tasks read --data_dir.")
    elif cfg.allow_many_labels:
        raise SystemExit("--allow_many_labels is an option of --task=text_classification "
                         "(your own files' labels).")
    elif not cfg.task or not cfg.data_dir:
        raise SystemExit("--task and --data_dir are required (see --help).")
    if cfg.ablation not in ABLATIONS:
        raise SystemExit(f"--ablation={cfg.ablation!r} is not one of: "
                         f"{', '.join(repr(a) for a in ABLATIONS)}.")
    check_family_formats(recipe, cfg.model, cfg.export_formats)
    if cfg.ablation and not recipe.ablations:
        raise SystemExit(f"--ablation={cfg.ablation!r} is an option of BERT (--model=bert).")
    return recipe.resolve(cfg)

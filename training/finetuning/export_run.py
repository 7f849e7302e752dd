"""`python -m training.export`'s run: a fine-tuned run's settings and model
read back, checked before anything is written, then exported under the
run folder's lock
(`training.finetuning.exports.export_model`)."""

import dataclasses
import json
import os

import keras

from keras_bert_impl.runtimes.formats import check_family_formats
from keras_bert_impl.runtimes.formats import check_installed
from keras_bert_impl.runtimes.formats import check_quantize
from keras_bert_impl.runtimes.formats import parse_formats
from training.finetuning.checks import bad_input
from training.finetuning.config import FinetuneConfig
from training.finetuning.exports import export_model
from training.finetuning.resolve import recipe_for
from training.run.checkpointing import OutputLock


def run(run_dir, export_formats, quantize="none"):
    """Exports `run_dir`'s model in `export_formats` (`quantize`: "int8",
    each runtime's int8 too, scored on the run's dev splits); returns the
    folders written. `SystemExit` naming the flag, file or format at fault."""
    try:
        formats = parse_formats(export_formats)
        check_installed(formats)
        check_quantize(formats, quantize)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    cfg, labels = _run_settings(run_dir)
    cfg = dataclasses.replace(cfg, export_formats=",".join(formats), quantize=quantize)
    recipe = recipe_for(cfg)
    check_family_formats(recipe, cfg.model, export_formats)
    model_file = os.path.join(run_dir, "export", "model.keras")
    if not os.path.isfile(model_file):
        raise SystemExit(f"--run_dir={run_dir}: no export/model.keras (a run made with "
                         "--noexport keeps no model to export).")
    try:  # the run's folder: not while a fine-tuning or another export writes it
        lock = OutputLock(run_dir)
    except RuntimeError as e:
        raise SystemExit(str(e)) from None
    try:
        task = dev_task(cfg, recipe) if quantize == "int8" else None
        model = keras.saving.load_model(model_file, compile=False)
        export_dir = os.path.join(run_dir, "export")
        export_model(model, recipe, cfg, export_dir, labels, save_keras=False, task=task)
    finally:
        lock.release()
    int8 = [f"{name}_int8" for name in formats] if quantize == "int8" else []
    return [os.path.join(export_dir, name) for name in [*formats, *int8]]


def dev_task(cfg, recipe):
    """The run's task, its dev splits read again from the run's data flags
    (`SystemExit` naming the file when one is gone or bad)."""
    with bad_input(f"--data_dir={cfg.data_dir}" if cfg.data_dir else "the data files", cfg.task):
        task = recipe.make_task(recipe.tokenizer())
        for split in task.eval_splits:
            task.prepare(split)
    return task


def _run_settings(run_dir):
    """(the run's resolved `FinetuneConfig`, its label strings or None),
    from `<run_dir>/summary.json`."""
    path = os.path.join(run_dir, "summary.json")
    if not os.path.isfile(path):
        raise SystemExit(f"--run_dir={run_dir}: no summary.json (not a finished "
                         "training.finetune run).")
    with open(path, encoding="utf-8") as f:
        summary = json.load(f)
    fields = {f.name for f in dataclasses.fields(FinetuneConfig)}
    config = {k: v for k, v in summary["config"].items() if k in fields}
    return FinetuneConfig(**config), summary.get("labels")

"""A fine-tuned model's export (`export_model`): each format of
`--export_formats` into its folder of the run's `export/` (the family's
SavedModel; ONNX, OpenVINO and LiteRT through `keras_bert_impl.runtimes`,
with the family's tokenizer beside them), and `model.keras`. The end of a
`training.finetune` run, and `training.export` for a run already trained."""

import json
import os
import time

from keras_bert_impl.runtimes.export import export_for_runtime
from keras_bert_impl.runtimes.formats import parse_formats
from keras_bert_impl.runtimes.text_to_ids import text_to_ids_source
from training.finetuning.quantization import quantize_exports


def say(message):
    print(message, flush=True)


def export_model(model, recipe, cfg, export_dir, labels, save_keras=True, task=None):
    """Each format of `--export_formats` into its folder of `export_dir`
    (the family's SavedModel and `model.keras`; ONNX, OpenVINO, LiteRT
    through `keras_bert_impl.runtimes`; with `--quantize=int8` each runtime's
    int8 too, scored on `task`'s dev splits), with `labels.json` for text
    classification's label strings. `cfg`: the run's resolved
    `FinetuneConfig`; `save_keras`: write `model.keras` too (not when the
    model came from it)."""
    say(f"Exporting to {export_dir} ...")
    export_started = time.perf_counter()
    os.makedirs(export_dir, exist_ok=True)
    formats = parse_formats(cfg.export_formats)
    if "saved_model" in formats:
        recipe.export(model, os.path.join(export_dir, "saved_model"), labels)
    for name in formats:
        if name != "saved_model":
            folder = _runtime_export(model, recipe, cfg, export_dir, name, labels)
            say(f"Exported {name} -> {folder}")
    if cfg.quantize == "int8":
        quantize_exports(model, task, export_dir, formats, say)
        say(f"int8 dev scores and sizes -> {os.path.join(export_dir, 'quantization.csv')}")
    if save_keras:
        model.save(os.path.join(export_dir, "model.keras"))
    if labels:  # model.keras holds ids; this maps them back to the label strings
        with open(os.path.join(export_dir, "labels.json.tmp"), "w", encoding="utf-8") as f:
            json.dump(labels, f, ensure_ascii=False)
        os.replace(os.path.join(export_dir, "labels.json.tmp"),
                   os.path.join(export_dir, "labels.json"))
    say(f"Exporting to {export_dir}: done in {time.perf_counter() - export_started:.1f} s")


def _runtime_export(model, recipe, cfg, export_dir, name, labels):
    """One runtime's export of `model` (`keras_bert_impl.runtimes.export`)
    with the family's tokenizer beside it; returns its folder."""
    files, import_line, constructor = recipe.runtime_tokenizer()
    source = text_to_ids_source(cfg.model, import_line, constructor, cfg.max_seq_length)
    info = {"task": cfg.task, "max_seq_length": cfg.max_seq_length,
            **({"labels": labels} if labels else {})}
    return export_for_runtime(model, export_dir, name, files, source, info)

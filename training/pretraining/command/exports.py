"""The runtime formats of a pretraining run's `--export_formats`
(`runtime_exports`): the family's backbone, token ids in and its outputs
out (the per-layer list left out: a runtime returns tensors, not lists),
for ONNX Runtime, OpenVINO or LiteRT
(`keras_bert_impl.runtimes`), each in its folder of the run's `export/`
with the tokenizer's files and `text_to_ids.py` beside it. The SavedModel
and the checkpoint files are the family recipe's `export`."""

import keras

from keras_bert_impl.runtimes.export import export_for_runtime
from keras_bert_impl.runtimes.formats import parse_formats
from keras_bert_impl.runtimes.text_to_ids import text_to_ids_source


def runtime_exports(recipe, model, vocab_file, export_dir, export_formats, family, max_seq_length):
    """Writes each runtime format of `export_formats` (saved_model is the
    recipe's) for `model.backbone`; returns the line that says where.
    `family`: `--model`; `vocab_file`: the run's vocabulary (None: no
    tokenizer beside the exports)."""
    names = [name for name in parse_formats(export_formats) if name != "saved_model"]
    files, source = [], None
    if vocab_file:
        files, import_line, constructor = recipe.runtime_tokenizer(vocab_file)
        source = text_to_ids_source(family, import_line, constructor, max_seq_length)
    info = {"model": f"{family} backbone", "max_seq_length": max_seq_length}
    served = serving_backbone(model.backbone)
    folders = [export_for_runtime(served, export_dir, name, files, source, info)
               for name in names]
    return "; ".join(f"{name} -> {folder}" for name, folder in zip(names, folders))


def serving_backbone(backbone):
    """`backbone`'s graph with its tensor outputs only (BERT's
    sequence_output and pooled_output; GPT's and its lm_logits), not the
    per-layer `encoder_outputs` list."""
    outputs = {name: value for name, value in backbone.output.items()
               if not isinstance(value, list | tuple)}
    return keras.Model(backbone.inputs, outputs, name=f"{backbone.name}_serving")

"""`--quantize=int8`'s export (`quantize_exports`): each runtime format's
int8 folder (`keras_bert_impl.runtimes.quantize`), then every dev score of
the task, by the Keras fp32 model and by the int8 export run in its own
runtime, and the size of each one's weights, in `export/quantization.csv`."""

import csv
import io
import os

import keras
import numpy as np

from keras_bert_impl.runtimes.quantize import quantize_for_runtime
from keras_bert_impl.runtimes.quantize import weights_bytes
from keras_bert_impl.runtimes.runners import load_export

COLUMNS = ("format", "precision", "split", "metric", "fp32", "int8", "change", "fp32_bytes",
           "int8_bytes", "size_ratio")


class ExportPredictor:
    """An export run in its runtime, answering `predict` as `keras.Model`
    does, so a task's `evaluate` scores it as it scores the Keras model:
    batches of `batch_size` rows in, outputs in the Keras model's structure."""

    weights = ()  # tasks.py fingerprints a model's weights to reuse its outputs

    def __init__(self, folder, output_structure):
        self.runner = load_export(folder)
        self.output_structure = output_structure

    def predict(self, x, batch_size=32, verbose=0, callbacks=None):
        del verbose, callbacks
        if not isinstance(x, dict):
            raise TypeError(f"An export takes its inputs by name, not {type(x).__name__}.")
        rows = len(next(iter(x.values())))
        outputs = [self.runner({k: np.asarray(v)[i:i + batch_size] for k, v in x.items()})
                   for i in range(0, rows, batch_size)]
        flat = [np.concatenate([out[name] for out in outputs]) for name in self.runner.outputs]
        return keras.tree.pack_sequence_as(self.output_structure, flat)


def quantize_exports(model, task, export_dir, formats, say=print):
    """Each runtime format of `formats` in int8 beside its fp32 folder in
    `export_dir`, scored on `task`'s dev splits; returns the CSV's rows."""
    rows = []
    reference = {split: task.evaluate(model, split)[0] for split in task.eval_splits}
    for name in formats:
        if name == "saved_model":
            continue
        folder = quantize_for_runtime(model, export_dir, name)
        fp32_bytes = weights_bytes(os.path.join(export_dir, name))
        int8_bytes = weights_bytes(folder)
        say(f"Exported {name} int8 -> {folder} ({int8_bytes / 2**20:.1f} MiB of weights, "
            f"{fp32_bytes / int8_bytes:.2f}x smaller)")
        predictor = ExportPredictor(folder, model.output)
        sizes = {"fp32_bytes": fp32_bytes, "int8_bytes": int8_bytes,
                 "size_ratio": round(fp32_bytes / int8_bytes, 3)}
        if not task.eval_splits:
            rows.append({"format": name, "precision": "int8", **sizes})
        for split in task.eval_splits:
            scores = task.evaluate(predictor, split)[0]
            for metric, fp32 in reference[split].items():
                if isinstance(fp32, float) and isinstance(scores.get(metric), float):
                    rows.append({"format": name, "precision": "int8", "split": split,
                                 "metric": metric, "fp32": fp32, "int8": scores[metric],
                                 "change": scores[metric] - fp32, **sizes})
                    say(f"  {name} int8 {split} {metric}: {scores[metric]:.4f} "
                        f"(fp32 {fp32:.4f})")
    _write_csv(os.path.join(export_dir, "quantization.csv"), rows)
    return rows


def _write_csv(path, rows):
    """`rows` as CSV at `path`, written whole (a temporary file renamed)."""
    text = io.StringIO()
    writer = csv.DictWriter(text, COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text.getvalue())
    os.replace(path + ".tmp", path)


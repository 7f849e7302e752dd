"""Serving throughput of a BERT SavedModel with its request checks and without.

Two exports of one model (a random-weight `BertBackbone` of `--preset`):
ours, as `export_saved_model` writes it, every request checked in the graph
(`keras_bert_impl/base/serving_checks.py`, issue 17), and the same export with
those checks replaced by identities. Both are loaded with
`tf.saved_model.load` in this process and their `serving_default` is called
on the same `--batch_size` x `--seq_length` int32 request; rounds alternate
(with, without, with, ...) so that a change in the machine's load hits both
alike. Prints each round's sequences per second, the medians and the ratio
(with / without; 1.0 = no cost). On a busy machine rounds scatter by more
than the checks cost, so it also times the checks alone: the same ops in a
`tf.function` of their own on the same request, less a `tf.function`
passing the request through (the cost of a call itself), as a share of one
served request's time.

    python benchmarks/serving_speed.py --preset=mini --batch_size=32 --seq_length=128
"""

import os
import statistics
import sys
import tempfile
import time
from unittest import mock

from absl import app
from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run as a script from anywhere

FLAGS = flags.FLAGS
flags.DEFINE_string("preset", "mini", "BERT preset of the exported backbone.")
flags.DEFINE_integer("batch_size", 32, "Sequences per request.")
flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
flags.DEFINE_integer("rounds", 10, "Timed rounds of each export (alternating).")
flags.DEFINE_integer("calls", 20, "Requests per round.")


def export_pair(folder):
    """`(with_checks, without_checks)` loaded `serving_default`s of one backbone."""
    import tensorflow as tf

    from keras_bert_impl import BertBackbone
    from keras_bert_impl import preset
    from keras_bert_impl.bert import bert_serving as serving

    backbone = BertBackbone.from_bert_config(preset(FLAGS.preset))
    checked = serving.export_saved_model(backbone, os.path.join(folder, "checked"))
    # The checks are traced into the graph at export: an export traced with
    # identities in their place is the same SavedModel less the checks.
    with mock.patch.object(serving, "checked_ids", lambda inputs, *args, **kwargs: dict(inputs)):
        unchecked = serving.export_saved_model(backbone, os.path.join(folder, "unchecked"))
    return (tf.saved_model.load(checked).signatures["serving_default"],
            tf.saved_model.load(unchecked).signatures["serving_default"])


def request(vocab_size):
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    shape = (FLAGS.batch_size, FLAGS.seq_length)
    return {"input_word_ids": tf.constant(rng.integers(0, vocab_size, shape), tf.int32),
            "input_mask": tf.ones(shape, tf.int32),
            "input_type_ids": tf.constant(rng.integers(0, 2, shape), tf.int32)}


def checks_alone():
    """The BERT export's request checks as a function of their own, and a
    function of the same inputs that only passes them through."""
    import tensorflow as tf

    from keras_bert_impl import BertBackbone
    from keras_bert_impl import preset
    from keras_bert_impl.bert.bert_backbone import INPUT_NAMES
    from keras_bert_impl.bert.bert_serving import _Serving

    module = _Serving(BertBackbone.from_bert_config(preset(FLAGS.preset)), None, FLAGS.seq_length)
    spec = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in INPUT_NAMES}

    @tf.function(autograph=False, input_signature=[spec])
    def check(inputs):
        return module.checked(inputs)

    @tf.function(autograph=False, input_signature=[spec])
    def pass_through(inputs):
        return {name: tf.identity(value) for name, value in inputs.items()}

    return check, pass_through


def seconds_per_call(fn, x, calls):
    fn(x)  # trace, warm up
    start = time.perf_counter()
    for _ in range(calls):
        out = fn(x)
    [value.numpy() for value in out.values()]
    return (time.perf_counter() - start) / calls


def sequences_per_second(serve, x):
    start = time.perf_counter()
    for _ in range(FLAGS.calls):
        out = serve(**x)
    out["pooled_output"].numpy()  # wait for the last one
    return FLAGS.calls * FLAGS.batch_size / (time.perf_counter() - start)


def main(argv):
    del argv
    from keras_bert_impl import preset

    with tempfile.TemporaryDirectory() as folder:
        served = dict(zip(("with_checks", "without_checks"), export_pair(folder)))
        x = request(preset(FLAGS.preset).vocab_size)
        for serve in served.values():  # warm up: first calls build kernels and caches
            for _ in range(3):
                serve(**x)
        rates = {name: [] for name in served}
        for round_ in range(FLAGS.rounds):
            names = list(served) if round_ % 2 == 0 else list(served)[::-1]
            for name in names:
                rates[name].append(sequences_per_second(served[name], x))
            print(f"round {round_ + 1:2d}: " + ", ".join(
                f"{name} {rates[name][-1]:8.1f} seq/s" for name in served), flush=True)
    medians = {name: statistics.median(values) for name, values in rates.items()}
    print(f"{FLAGS.preset} BertBackbone export, batch {FLAGS.batch_size} x {FLAGS.seq_length}, "
          f"{FLAGS.rounds} rounds of {FLAGS.calls} requests, medians:")
    for name, value in medians.items():
        print(f"  {name:15s} {value:8.1f} seq/s")
    ratio = medians["with_checks"] / medians["without_checks"]
    print(f"  ratio with / without: {ratio:.4f} (cost {100 * (1 - ratio):+.2f}%)")
    check, pass_through = checks_alone()
    times = {"check": [], "pass_through": []}
    for _ in range(5):  # alternating, as above
        times["check"].append(seconds_per_call(check, x, 500))
        times["pass_through"].append(seconds_per_call(pass_through, x, 500))
    check, call = (statistics.median(times[name]) for name in ("check", "pass_through"))
    request_seconds = FLAGS.batch_size / medians["with_checks"]
    print(f"  the checks alone: {1e6 * (check - call):.0f} us per request ({1e6 * check:.0f} us "
          f"a call of them less {1e6 * call:.0f} us a call passing the request through), "
          f"{100 * (check - call) / request_seconds:.3f}% of a served request "
          f"({1e3 * request_seconds:.1f} ms)")


if __name__ == "__main__":
    app.run(main)

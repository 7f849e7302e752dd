"""What every pretraining recipe of `training.pretrain` shares: messages,
telling TFRecords from text, the default corpus, held-out text."""

import glob
import json
import os
import time

from training.pretraining.default_corpus import write_default_corpus


def checkpoint_interval(total_steps, requested):
    """The largest interval <= `requested` that divides `total_steps`
    (`fit` epochs are checkpoint intervals, all of one length)."""
    requested = max(1, min(requested, total_steps))
    return max(d for d in range(1, requested + 1) if total_steps % d == 0)


def say(message):
    print(message, flush=True)


def is_tfrecords(spec):
    if not spec:
        return False
    if os.path.isdir(spec) or spec.endswith(".json"):
        return True
    return any(".tfrecord" in f or f.endswith(".rec") for f in glob.glob(spec.split(",")[0]))


def text_files(spec):
    files = sorted({f for pattern in spec.split(",") if pattern for f in glob.glob(pattern)})
    if not files:
        raise SystemExit(f"No files match --input={spec!r}.")
    return files


def records_input(cfg):
    """`(train, held-out or None, vocab file or None)` when `--input` names
    TFRecords (nothing to write), else None."""
    if not is_tfrecords(cfg.input):
        return None
    heldout = cfg.heldout_input or None
    if heldout and not is_tfrecords(heldout):
        raise SystemExit("--heldout_input must be TFRecords when --input is.")
    return cfg.input, heldout, cfg.vocab_file or None


def text_sources(cfg):
    """-> (data folder, training text files, held-out text files or None).

    With no `--input`, writes the default corpus (the standard library's
    docstrings and pydoc topics) once into the run's data folder.
    """
    data_dir = os.path.join(cfg.output_dir, "data")
    if cfg.input:
        heldout = text_files(cfg.heldout_input) if cfg.heldout_input else None
        return data_dir, text_files(cfg.input), heldout
    corpus_dir = os.path.join(data_dir, "corpus")
    paths = {"train": os.path.join(corpus_dir, "train.txt"),
             "heldout": os.path.join(corpus_dir, "heldout.txt")}
    if not all(os.path.exists(p) for p in paths.values()):
        start = time.time()
        paths, counts = write_default_corpus(corpus_dir)
        size = os.path.getsize(paths["train"]) / 1e6
        say(f"Default corpus: {counts['train']} training documents ({size:.1f} MB), "
            f"{counts['heldout']} held out, from the standard library's docstrings and "
            f"pydoc topics ({time.time() - start:.0f} s) -> {corpus_dir}")
    return data_dir, [paths["train"]], [paths["heldout"]]


def heldout_text(cfg):
    """Held-out text files for examples after training, or None."""
    if cfg.heldout_input and not is_tfrecords(cfg.heldout_input):
        return text_files(cfg.heldout_input)
    if not cfg.input:
        return [os.path.join(cfg.output_dir, "data", "corpus", "heldout.txt")]
    return None


def write_json(path, value):
    """Writes JSON atomically (temp file, then rename)."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2, default=float)
    os.replace(tmp, path)

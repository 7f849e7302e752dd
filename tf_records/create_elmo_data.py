"""Command line: tokenized text -> ELMo TFRecords (bilm-tf's batches) + manifest.json.

    python -m tf_records.create_elmo_data \
        --input_file='corpus/*.txt' --vocab_file=vocab.txt --output_dir=data/ \
        --batch_size=128 --unroll_steps=20

bilm-tf's data: one whitespace-tokenized sentence per line, a vocabulary
starting `<S>`, `</S>`, `<UNK>` (without `--vocab_file`, one is learned from
the text, `--vocab_size` words at most, and written to
`<output_dir>/vocab.txt`), B streams of `unroll_steps`-token windows.
Train on them with the same batch size:
`python -m training.pretrain --model=elmo --input=data/ --global_batch_size=128`.
"""

import functools

from absl import flags

from tf_records.command_line import console
from tf_records.command_line.progress import Reporter

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
    """The command's flags, on `flag_values` (a fresh `flags.FlagValues()`
    runs the command in-process)."""
    def define(kind, *args, **kwargs):
        kind(*args, flag_values=flag_values, **kwargs)

    define(flags.DEFINE_list, "input_file", None, "Tokenized text files or globs (plain or .gz).",
           required=True)
    define(flags.DEFINE_string, "vocab_file", "",
           "bilm-tf vocab.txt; empty: learn one from the text.")
    define(flags.DEFINE_integer, "vocab_size", 100_000,
           "Words of a learned vocabulary (specials included).")
    define(flags.DEFINE_string, "output_dir", None, "Folder for shards and manifest.json.",
           required=True)
    define(flags.DEFINE_bool, "overwrite", False,
           "Replace records of another kind or settings in --output_dir (never other files).")
    define(flags.DEFINE_integer, "batch_size", 128,
           "Streams (bilm-tf: 128 per GPU); the training batch.")
    define(flags.DEFINE_integer, "unroll_steps", 20, "Tokens per window (bilm-tf: 20).")
    define(flags.DEFINE_integer, "shuffle_seed", 12345,
           "Sentence shuffle seed; -1 keeps file order.")


def main(argv, progress=None):
    del argv
    run(FLAGS, progress)


def run(values, progress=None):
    """The command on parsed flags `values`: flags, files and the vocabulary
    checked before the output folder is touched; `SystemExit` naming what
    is wrong. `progress`: None or a reporter of the counting's, reading's
    and writing's progress lines (`cli` passes `tf_records.command_line.progress.Reporter()`)."""
    # lazy: TensorFlow loads only after the console starts (tf_records/command_line/console.py)
    from tf_records.elmo import command

    command.run(values, progress)


def cli():
    """`python -m tf_records.create_elmo_data`: `main` on a quiet console."""
    define_flags()
    console.run(functools.partial(main, progress=Reporter()), __name__, swapped=True)


if __name__ == "__main__":
    cli()

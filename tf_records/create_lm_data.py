"""Command line: text files -> sharded language-model TFRecords + manifest.json.

    python -m tf_records.create_lm_data \
        --input_file='corpus/*.txt' --vocab_file=vocab.json --merges_file=merges.txt \
        --output_dir=data/ --max_seq_length=512 --num_shards=8

GPT's pretraining data: the documents as one token stream (BPE), cut into
windows of max_seq_length + 1 tokens that overlap by one, in a shuffled
order. Read it with `tf_records.gpt.reader.lm_dataset`.
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

    define(flags.DEFINE_list, "input_file", None, "Text files or globs (plain or .gz).",
           required=True)
    define(flags.DEFINE_string, "vocab_file", None, "vocab.json of the GPT BPE tokenizer.",
           required=True)
    define(flags.DEFINE_string, "merges_file", None, "merges.txt of the GPT BPE tokenizer.",
           required=True)
    define(flags.DEFINE_string, "output_dir", None, "Folder for shards and manifest.json.",
           required=True)
    define(flags.DEFINE_bool, "overwrite", False,
           "Replace records of another kind or settings in --output_dir (never other files).")
    define(flags.DEFINE_integer, "max_seq_length", 512,
           "Tokens the model reads (GPT's n_ctx is 512).")
    define(flags.DEFINE_integer, "num_shards", 8,
           "Shards (at least the number of input pipelines).")
    define(flags.DEFINE_integer, "random_seed", 12345, "Seed of the window order.")
    define(flags.DEFINE_integer, "document_separator_id", None,
           "Token id appended after every document (GPT's release has none).")


def main(argv, progress=None):
    del argv
    run(FLAGS, progress)


def run(values, progress=None):
    """The command on parsed flags `values`: flags and files checked first,
    then written; `SystemExit` naming what is wrong. `progress`: None or a
    reporter of the tokenizing's and writing's progress lines (`cli` passes
    `tf_records.command_line.progress.Reporter()`)."""
    # lazy: TensorFlow loads only after the console starts (tf_records/command_line/console.py)
    from tf_records.gpt import command

    command.run(values, progress)


def cli():
    """`python -m tf_records.create_lm_data`: `main` on a quiet console."""
    define_flags()
    console.run(functools.partial(main, progress=Reporter()), __name__, swapped=True)


if __name__ == "__main__":
    cli()

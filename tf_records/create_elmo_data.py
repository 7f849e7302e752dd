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
import os
import tempfile

from absl import flags

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
    from keras_bert_impl.elmo.elmo_vocab import load_elmo_vocab
    from keras_bert_impl.elmo.elmo_vocab import write_elmo_vocab
    from tf_records.elmo.schema import ElmoRecordSchema
    from tf_records.elmo.writer import learn_vocab_from_text
    from tf_records.elmo.writer import write_elmo_data
    from tf_records.input_files import match_files

    try:
        files = match_files(values.input_file, "--input_file")
        ElmoRecordSchema(values.unroll_steps, values.batch_size)
        if values.vocab_size < 4:
            raise ValueError(f"--vocab_size must be >= 4 (<S>, </S>, <UNK> and a word). "
                             f"Received: {values.vocab_size}.")
    except ValueError as e:
        raise SystemExit(f"Bad flag value: {e}") from None
    try:
        with tempfile.TemporaryDirectory(prefix="kbi-elmo-vocab-") as learned:
            vocab_file = values.vocab_file
            if vocab_file:
                load_elmo_vocab(vocab_file)
            else:  # swapped in with the records, as <output_dir>/vocab.txt
                tokens = learn_vocab_from_text(files, max_size=values.vocab_size,
                                               progress=progress)
                if len(tokens) <= 3:
                    raise ValueError(f"No words in {', '.join(files)}: cannot learn a "
                                     "vocabulary.")
                vocab_file = os.path.join(learned, "vocab.txt")
                write_elmo_vocab(tokens, vocab_file)
            manifest = write_elmo_data(
                files, vocab_file, values.output_dir, values.batch_size, values.unroll_steps,
                shuffle_seed=None if values.shuffle_seed < 0 else values.shuffle_seed,
                progress=progress, overwrite=values.overwrite, copy_vocab=not values.vocab_file)
    except ValueError as e:
        raise SystemExit(f"Bad input: {e}") from None
    if not values.vocab_file:
        print(f"Learned a {len(tokens)}-word vocabulary -> "
              f"{os.path.join(values.output_dir, 'vocab.txt')}")
    print(f"Wrote {manifest['batches']} batches of {values.batch_size} streams x "
          f"{values.unroll_steps} tokens ({manifest['sentences']} sentences, {manifest['tokens']} "
          f"tokens) in {len(manifest['shards'])} shards to {values.output_dir}")


def cli():
    """`python -m tf_records.create_elmo_data`: `main` on a quiet console."""
    # Imported here: only the command line needs them, the record code never does.
    from tf_records.command_line import console
    from tf_records.command_line.progress import Reporter

    define_flags()
    console.run(functools.partial(main, progress=Reporter()), __name__, swapped=True)


if __name__ == "__main__":
    cli()

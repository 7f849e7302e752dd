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

import glob
import os

from absl import flags

FLAGS = flags.FLAGS
flags.DEFINE_list("input_file", None, "Tokenized text files or globs (plain or .gz).",
                  required=True)
flags.DEFINE_string("vocab_file", "", "bilm-tf vocab.txt; empty: learn one from the text.")
flags.DEFINE_integer("vocab_size", 100_000, "Words of a learned vocabulary (specials included).")
flags.DEFINE_string("output_dir", None, "Folder for shards and manifest.json.", required=True)
flags.DEFINE_integer("batch_size", 128, "Streams (bilm-tf: 128 per GPU); the training batch.")
flags.DEFINE_integer("unroll_steps", 20, "Tokens per window (bilm-tf: 20).")
flags.DEFINE_integer("shuffle_seed", 12345, "Sentence shuffle seed; -1 keeps file order.")


def main(argv):
    del argv
    from keras_bert_impl.elmo.elmo_vocab import learn_elmo_vocab
    from keras_bert_impl.elmo.elmo_vocab import write_elmo_vocab
    from tf_records.elmo_writer import read_sentences
    from tf_records.elmo_writer import write_elmo_data

    files = sorted({f for pattern in FLAGS.input_file for f in glob.glob(pattern)})
    if not files:
        raise SystemExit(f"No files match {FLAGS.input_file}.")
    vocab_file = FLAGS.vocab_file
    if not vocab_file:
        vocab_file = os.path.join(FLAGS.output_dir, "vocab.txt")
        tokens = learn_elmo_vocab(read_sentences(files), max_size=FLAGS.vocab_size)
        write_elmo_vocab(tokens, vocab_file)
        print(f"Learned a {len(tokens)}-word vocabulary -> {vocab_file}")
    manifest = write_elmo_data(
        files, vocab_file, FLAGS.output_dir, FLAGS.batch_size, FLAGS.unroll_steps,
        shuffle_seed=None if FLAGS.shuffle_seed < 0 else FLAGS.shuffle_seed)
    print(f"Wrote {manifest['batches']} batches of {FLAGS.batch_size} streams x "
          f"{FLAGS.unroll_steps} tokens ({manifest['sentences']} sentences, {manifest['tokens']} "
          f"tokens) in {len(manifest['shards'])} shards to {FLAGS.output_dir}")


def cli():
    """`python -m tf_records.create_elmo_data`: `main` on a quiet console."""
    # Imported here: only the command line needs it, the record code never does.
    from training import console

    console.run(main, __name__)


if __name__ == "__main__":
    cli()

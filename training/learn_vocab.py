"""Learns a BERT WordPiece vocabulary from text files.

    python -m training.learn_vocab --input='corpus/*.txt' --output=vocab.txt \
        --vocab_size=30522 --do_lower_case

Input: plain or gzip text files; every line is text. Output: `vocab.txt`
with [PAD], [unused0..98], [UNK], [CLS], [SEP], [MASK] first (ids 0..103,
as the original release), then single characters and WordPiece tokens.
"""

import glob
import gzip

from absl import app
from absl import flags

FLAGS = flags.FLAGS
flags.DEFINE_list("input", None, "Text files or glob patterns (plain or .gz).", required=True)
flags.DEFINE_string("output", "vocab.txt", "Where to write the vocabulary.")
flags.DEFINE_integer("vocab_size", 30522, "Largest vocabulary size.")
flags.DEFINE_bool("do_lower_case", True, "Lowercase and strip accents (uncased).")
flags.DEFINE_integer("num_unused", 99, "[unusedN] slots after [PAD].")


def read_lines(patterns):
    files = sorted({f for pattern in patterns for f in glob.glob(pattern)})
    if not files:
        raise SystemExit(f"No files match {patterns}.")
    for path in files:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.strip():
                    yield line


def main(argv):
    del argv
    from keras_bert_impl.tokenizers.vocab_learner import learn_vocab
    from keras_bert_impl.tokenizers.vocab_learner import write_vocab

    tokens = learn_vocab(
        read_lines(FLAGS.input),
        vocab_size=FLAGS.vocab_size,
        do_lower_case=FLAGS.do_lower_case,
        num_unused=FLAGS.num_unused,
    )
    write_vocab(tokens, FLAGS.output)
    print(f"Wrote {len(tokens)} tokens to {FLAGS.output}")


if __name__ == "__main__":
    app.run(main)

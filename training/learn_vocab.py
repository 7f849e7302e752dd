"""Learns a BERT WordPiece, a GPT byte-pair-encoding or an XLNet SentencePiece
vocabulary from text files.

    python -m training.learn_vocab --input='corpus/*.txt' --output=vocab.txt \
        --vocab_size=30522 --do_lower_case
    python -m training.learn_vocab --model=gpt --input='corpus/*.txt' \
        --output=gpt_vocab --vocab_size=40478
    python -m training.learn_vocab --model=xlnet --input='corpus/*.txt' \
        --output_dir=xlnet_vocab --vocab_size=32000

Input: plain or gzip text files; every line is text.

`--model=bert` (the default) writes `vocab.txt` with [PAD], [unused0..98],
[UNK], [CLS], [SEP], [MASK] first (ids 0..103, as the original release),
then single characters and WordPiece tokens.

`--model=gpt` writes `vocab.json` and `merges.txt` into the folder
`--output`, as openai-gpt's: characters, their "</w>" forms, merged
symbols, "<unk>"; lowercased, accents stripped (`--do_lower_case` and
`--num_unused` are BERT's only).

`--model=xlnet` writes `spiece.model` and `spiece.vocab` into the folder
`--output` (or `--output_dir`): a SentencePiece unigram model trained with
XLNet's flags, <unk> <s> </s> <cls> <sep> <pad> <mask> <eod> <eop> at ids
0..8 as the released model. Cased unless `--do_lower_case` is given
explicitly (XLNet's released model is cased); accents are stripped.
"""

import glob
import gzip

from absl import app
from absl import flags

from training import console

FLAGS = flags.FLAGS
flags.DEFINE_enum("model", "bert", ["bert", "gpt", "xlnet"],
                  "Which tokenizer's vocabulary to learn.")
flags.DEFINE_list("input", None, "Text files or glob patterns (plain or .gz).", required=True)
flags.DEFINE_string("output", "vocab.txt",
                    "Where to write the vocabulary (gpt, xlnet: a folder).")
flags.DEFINE_alias("output_dir", "output")
flags.DEFINE_integer("vocab_size", 30522, "Largest vocabulary size.")
flags.DEFINE_bool("do_lower_case", True, "Lowercase and strip accents (uncased).")
flags.DEFINE_integer("num_unused", 99, "[unusedN] slots after [PAD].")


def input_files(patterns):
    files = sorted({f for pattern in patterns for f in glob.glob(pattern)})
    if not files:
        raise SystemExit(f"No files match {patterns}.")
    return files


def read_lines(patterns):
    for path in input_files(patterns):
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.strip():
                    yield line


def main(argv):
    del argv
    if FLAGS.model == "gpt":
        learn_gpt_vocab()
        return
    if FLAGS.model == "xlnet":
        learn_xlnet_vocab()
        return
    from keras_bert_impl.tokenizers.vocab_learner import write_vocab
    from training.bert_recipe import learn_wordpiece

    files = input_files(FLAGS.input)
    tokens = learn_wordpiece(read_lines(files), files, FLAGS.vocab_size, FLAGS.do_lower_case,
                             num_unused=FLAGS.num_unused)
    write_vocab(tokens, FLAGS.output)
    print(f"Wrote {len(tokens)} tokens to {FLAGS.output}")


def learn_gpt_vocab():
    if FLAGS.output.endswith(".txt"):
        raise app.UsageError(
            f"--model=gpt writes vocab.json and merges.txt into a folder; got "
            f"--output={FLAGS.output}. Pass --output=DIR.")
    from keras_bert_impl.gpt.bpe_learner import learn_bpe
    from keras_bert_impl.gpt.bpe_learner import write_bpe_files

    vocab, merges = learn_bpe(read_lines(FLAGS.input), vocab_size=FLAGS.vocab_size)
    vocab_path, merges_path = write_bpe_files(vocab, merges, FLAGS.output)
    print(f"Wrote {len(vocab)} tokens to {vocab_path} and {len(merges)} merges to {merges_path}")


def learn_xlnet_vocab():
    if FLAGS.output.endswith(".txt"):
        raise app.UsageError(
            f"--model=xlnet writes spiece.model and spiece.vocab into a folder; got "
            f"--output={FLAGS.output}. Pass --output_dir=DIR.")
    from keras_bert_impl.xlnet.spm_learner import learn_sentencepiece
    from keras_bert_impl.xlnet.xlnet_tokenizer import XLNetTokenizer

    # BERT's flag defaults to uncased; XLNet lowercases only when asked.
    do_lower_case = FLAGS["do_lower_case"].present and FLAGS.do_lower_case
    model_file = learn_sentencepiece(
        input_files(FLAGS.input), FLAGS.output, FLAGS.vocab_size, do_lower_case=do_lower_case)
    tokenizer = XLNetTokenizer(model_file, do_lower_case=do_lower_case)
    print(f"Wrote {tokenizer.vocab_size} pieces ({'uncased' if do_lower_case else 'cased'}; "
          f"<cls>={tokenizer.cls_id} <sep>={tokenizer.sep_id} <eop>={tokenizer.eop_id}) "
          f"to {model_file}")


def cli():
    """`kbi-learn-vocab` and `python -m training.learn_vocab`: `main` on a quiet console."""
    console.run(main, __name__, output_flag=None)  # a vocabulary folder is no run folder


if __name__ == "__main__":
    cli()

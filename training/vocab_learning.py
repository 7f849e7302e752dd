"""The learners of `training.learn_vocab`, one per `--model`: BERT's
WordPiece, GPT's byte-pair encoding and XLNet's SentencePiece, each reading
the input files' lines and writing its vocabulary to `--output`.

The command imports this module once its flags and files are checked, inside
its console: the learners' models import TensorFlow."""

import gzip
import zlib

from keras_bert_impl.bert.wordpiece_learner import write_vocab
from keras_bert_impl.gpt.bpe_learner import write_bpe_files
from keras_bert_impl.xlnet.spm_learner import learn_sentencepiece
from keras_bert_impl.xlnet.xlnet_tokenizer import XLNetTokenizer
from tf_records.command_line.progress import Reporter
from training.bert.recipe import learn_wordpiece
from training.gpt.recipe import learn_gpt_bpe


def read_lines(files):
    """The non-blank lines of text files (plain or .gz), without line ends."""
    for path in files:
        opener = gzip.open if path.endswith(".gz") else open
        try:
            with opener(path, "rt", encoding="utf-8", errors="replace") as f:
                for line in f:
                    if line.strip():
                        yield line.rstrip("\r\n")
        except (OSError, EOFError, zlib.error) as e:  # a broken .gz: gzip names no file
            raise SystemExit(f"Cannot read --input file {path}: {e}") from None


def learn_bert_vocab(values, files):
    tokens = learn_wordpiece(read_lines(files), files, values.vocab_size,
                             values.do_lower_case, num_unused=values.num_unused)
    write_vocab(tokens, values.output)
    print(f"Wrote {len(tokens)} tokens to {values.output}")


def learn_gpt_vocab(values, files):
    vocab, merges = learn_gpt_bpe(read_lines(files), files, values.vocab_size)
    vocab_path, merges_path = write_bpe_files(vocab, merges, values.output)
    print(f"Wrote {len(vocab)} tokens to {vocab_path} and {len(merges)} merges to {merges_path}")


def learn_xlnet_vocab(values, files):
    # BERT's flag defaults to uncased; XLNet lowercases only when asked.
    present = values["do_lower_case"].present if hasattr(values, "__getitem__") else False
    do_lower_case = present and values.do_lower_case
    try:
        model_file = learn_sentencepiece(
            files, values.output, values.vocab_size, do_lower_case=do_lower_case,
            progress=Reporter())
    except ValueError as e:
        raise SystemExit(str(e)) from None
    tokenizer = XLNetTokenizer(model_file, do_lower_case=do_lower_case)
    print(f"Wrote {tokenizer.vocab_size} pieces ({'uncased' if do_lower_case else 'cased'}; "
          f"<cls>={tokenizer.cls_id} <sep>={tokenizer.sep_id} <eop>={tokenizer.eop_id}) "
          f"to {model_file}")


# --model -> its learner: the one place this command chooses code by a model's name.
LEARNERS = {"bert": learn_bert_vocab, "gpt": learn_gpt_vocab, "xlnet": learn_xlnet_vocab}

"""Bad input (issue 17) to vocabulary learning (`training.learn_vocab`) and
to the tokenizers: BERT's, GPT's, XLNet's and `BertPreprocessor`.

The table's machinery, and what each case asserts of the exit status,
the message and the output folder: `tests/bad_input_cases.py`.
"""

import os
import sys

import pytest
from absl import app
from bad_input_cases import GPT_MERGES
from bad_input_cases import GPT_VOCAB
from bad_input_cases import SPM
from bad_input_cases import VOCAB
from bad_input_cases import command
from bad_input_cases import outcome
from bad_input_cases import table
from bad_input_cases import write_text

CASES, case, test_bad_input, assets = table()


# --- training.learn_vocab ---------------------------------------------------------------------

def _vocab(a, out, *flags_):
    from training import learn_vocab

    return command(learn_vocab, f"--input={a.corpus}", f"--output={out}", "--vocab_size=200",
                   *flags_)


def _vocab_fixed(a, out):
    got = _vocab(a, out)
    assert os.path.isfile(out), got
    return got


@case(1, lambda a, out: ["--input", "nope"], "usable", _vocab_fixed)
def case_vocab_one_glob_matches_nothing(a, out):
    return _vocab(a, out, f"--input={a.corpus},{a.path('nope')}*.txt")


@case(1, lambda a, out: ["--vocab_size=0"], "usable", _vocab_fixed)
def case_vocab_size_zero(a, out):
    return _vocab(a, out, "--vocab_size=0")


@case(app.UsageError, lambda a, out: ["--output=" + out + ".txt", "--model=gpt"], "absent")
def case_vocab_gpt_output_txt(a, out):
    return _vocab(a, out, "--model=gpt", f"--output={out}.txt")


@case(1, lambda a, out: ["--output=" + out, "is a folder"], "unchanged",
      prepare=lambda a, out: os.makedirs(out))
def case_vocab_bert_output_is_a_folder(a, out):
    return _vocab(a, out)


@case(1, lambda a, out: [a.path("broken_vocab.txt.gz"), "Not a gzipped file"], "usable",
      _vocab_fixed)
def case_vocab_broken_gzip(a, out):
    write_text(a.path("broken_vocab.txt.gz"), "plain text\n")
    return _vocab(a, out, f"--input={a.path('broken_vocab.txt.gz')}")


# --- tokenizers ---------------------------------------------------------------------------------

@case(TypeError, lambda a, out: ["texts[1]", "int", "3"])
def case_tokenizer_non_string_item(a, out):
    from keras_bert_impl.bert.bert_tokenizer import BertTokenizer

    return outcome(lambda: BertTokenizer(VOCAB)(["fine", 3]))


@case(TypeError, lambda a, out: ["text_pairs[0]", "NoneType"])
def case_tokenizer_non_string_pair(a, out):
    from keras_bert_impl.bert.bert_tokenizer import BertTokenizer

    return outcome(lambda: BertTokenizer(VOCAB)(["fine"], [None]))


@case(TypeError, lambda a, out: ["`text`", "float", "2.5"])
def case_tokenizer_encode_non_string(a, out):
    from keras_bert_impl.bert.bert_tokenizer import BertTokenizer

    return outcome(lambda: BertTokenizer(VOCAB).encode(2.5))


@case(TypeError, lambda a, out: ["`texts`", "int"])
def case_tokenizer_batch_not_a_list(a, out):
    from keras_bert_impl.bert.bert_tokenizer import BertTokenizer

    return outcome(lambda: BertTokenizer(VOCAB)(7))


@case(ValueError, lambda a, out: ["max_length", "1"])
def case_tokenizer_max_length_too_small(a, out):
    from keras_bert_impl.bert.bert_tokenizer import BertTokenizer

    return outcome(lambda: BertTokenizer(VOCAB).encode("hello", max_length=1))


@case(ValueError, lambda a, out: [a.path("no_cls_vocab.txt"), "[CLS]"])
def case_tokenizer_vocab_without_cls(a, out):
    from keras_bert_impl.bert.bert_tokenizer import BertTokenizer

    path = write_text(a.path("no_cls_vocab.txt"), "[PAD]\n[UNK]\n[SEP]\n[MASK]\nword\n")
    return outcome(lambda: BertTokenizer(path))


@case(TypeError, lambda a, out: ["texts[2]", "bytearray"])
def case_gpt_tokenizer_non_string_item(a, out):
    from keras_bert_impl.gpt.gpt_tokenizer import GptTokenizer

    return outcome(lambda: GptTokenizer(GPT_VOCAB, GPT_MERGES)(["a", "b", bytearray(b"c")],
                                                                max_length=8))


@case(TypeError, lambda a, out: ["text[1]", "int"])
def case_gpt_tokenizer_encode_non_string_item(a, out):
    from keras_bert_impl.gpt.gpt_tokenizer import GptTokenizer

    return outcome(lambda: GptTokenizer(GPT_VOCAB, GPT_MERGES).encode(["a", 5]))


@case(TypeError, lambda a, out: ["texts[1]", "dict"])
def case_xlnet_tokenizer_non_string_item(a, out):
    from keras_bert_impl.xlnet.xlnet_tokenizer import XLNetTokenizer

    return outcome(lambda: XLNetTokenizer(SPM)(["fine", {"a": 1}], max_length=8))


@case(TypeError, lambda a, out: ["`inputs`", "dtype int32"])
def case_preprocessor_non_string_tensor(a, out):
    import tensorflow as tf

    from keras_bert_impl.bert.bert_preprocessor import BertPreprocessor

    return outcome(lambda: BertPreprocessor(VOCAB, max_length=8)(tf.constant([1, 2])))


@case(ValueError, lambda a, out: ["`texts`", "one string per example", "(2, 3)"])
def case_preprocessor_two_strings_per_example(a, out):
    import tensorflow as tf

    from keras_bert_impl.bert.bert_preprocessor import BertPreprocessor

    texts = tf.constant([["a", "b", "c"], ["d", "e", "f"]])
    return outcome(lambda: BertPreprocessor(VOCAB, max_length=8)((texts, texts)))


# --- vague errors that now name their cause ---------------------------------------------------

@case(1, lambda a, out: ["--input: " + a.path("vocab_latin1.txt") + ":2: not UTF-8"], "absent")
def case_learn_vocab_bytes_not_utf8(a, out):
    from training import learn_vocab

    path = a.path("vocab_latin1.txt")
    with open(path, "wb") as f:
        f.write(b"plain words here\ncaf\xe9 au lait\n")
    return command(learn_vocab, f"--input={path}", f"--output={out}", "--vocab_size=50")


@case(1, lambda a, out: [f"{out} is being written by process {os.getpid()}"], "absent")
def case_learn_vocab_second_learner_on_one_output(a, out):
    from tf_records.records_folder import output_lock

    lock = output_lock(out)  # a learner at work on the same --output
    try:
        return _vocab(a, out)
    finally:
        os.close(lock)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))

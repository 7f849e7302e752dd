"""XLNet fine-tuning's shared test data: the test SentencePiece model and
its special ids, transformers' task-parity folder, random id rows, and the
module-scoped `tokenizer` fixture."""

import os

import pytest

from keras_bert_impl.xlnet.xlnet_inputs import XLNetSpecialIds
from keras_bert_impl.xlnet.xlnet_tokenizer import XLNetTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
GOLDENS = os.path.join(HERE, "goldens")
# XLNet's SentencePiece model (4,000 pieces, <cls>=3 <sep>=4 <pad>=5), see
# make_xlnet_tokenizer_goldens.py.
SPM = os.path.join(GOLDENS, "xlnet_spm", "spiece.model")
# A random transformers XLNet (vocab 99, d_model 10, 2 heads of 5, d_inner
# 23, 2 layers) and its task heads' weights and outputs
# (make_xlnet_task_parity.py).
PARITY = os.path.join(GOLDENS, "xlnet_task_parity")
SPECIAL = XLNetSpecialIds(sep=4, cls=3, pad=5)
NAMES = ("input_word_ids", "input_type_ids", "input_mask")


@pytest.fixture(scope="module", name="tokenizer")
def spm_tokenizer():
    return XLNetTokenizer(SPM)


def random_rows(rng, count, length, low=1, high=6):
    """`count` rows of 1 to 5 random ids (9..98), at most `length` of them."""
    return [rng.integers(9, 99, rng.integers(low, high)).tolist() for _ in range(count)][:length]

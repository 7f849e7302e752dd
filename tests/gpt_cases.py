"""GPT fine-tuning's shared test data: the fine-tuning ids appended to a
99-token vocabulary and the `backbone` fixture on them."""

import pytest

from keras_bert_impl.gpt import GptBackbone
from keras_bert_impl.gpt import GptConfig
from keras_bert_impl.gpt import grow_vocabulary
from keras_bert_impl.gpt.gpt_inputs import FineTuningIds

SPECIAL = FineTuningIds.appended_to(99)  # start 99, delimiter 100, classify 101
S, D, C = SPECIAL.start, SPECIAL.delimiter, SPECIAL.classify


@pytest.fixture(name="backbone")
def grown_backbone():
    """Odd sizes: vocab 99 (+3 fine-tuning tokens), hidden 12, 3 heads, 2 layers."""
    config = GptConfig(vocab_size=99, n_positions=16, n_embd=12, n_layer=2, n_head=3)
    return grow_vocabulary(GptBackbone.from_config_object(config), 3)

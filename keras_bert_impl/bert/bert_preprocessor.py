"""`BertPreprocessor`: a Keras layer from raw strings to the model's inputs."""

import keras
import tensorflow as tf

from keras_bert_impl.base.layer_config import NamedConfig
from keras_bert_impl.bert.graph_bert_tokenizer import GraphBertTokenizer
from keras_bert_impl.tokenizers.basic_tokenizer import check_texts


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertPreprocessor(NamedConfig, keras.layers.Layer):
    """Tokenizes and packs text in the TF graph, for `tf.data` and serving.

    Same ids as `BertTokenizer` (see `GraphBertTokenizer`), packed as
    `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]` to a fixed length.

    Args:
        vocab_file: str. `vocab.txt`.
        do_lower_case: bool. True for uncased checkpoints.
        max_length: int. Output length, special tokens included.
        max_input_chars_per_word: int. Longer words become [UNK].

    Call arguments:
        inputs: string tensor `(B,)`, or a pair `(texts, text_pairs)`.

    Returns:
        dict of int32 `(B, max_length)` tensors `input_word_ids`,
        `input_mask`, `input_type_ids`.

    Example:
    >>> preprocessor = BertPreprocessor("vocab.txt", max_length=128)
    >>> ds = ds.map(lambda text, label: (preprocessor(text), label))
    """

    config_names = ("vocab_file", "do_lower_case", "max_length", "max_input_chars_per_word")

    def __init__(
        self, vocab_file, do_lower_case=True, max_length=128, max_input_chars_per_word=200, **kwargs
    ):
        super().__init__(**kwargs)
        if max_length < 3:
            raise ValueError(f"`max_length` must be at least 3. Received: max_length={max_length}.")
        self.vocab_file = vocab_file
        self.do_lower_case = do_lower_case
        self.max_length = max_length
        self.max_input_chars_per_word = max_input_chars_per_word
        self.tokenizer = GraphBertTokenizer(
            vocab_file, do_lower_case=do_lower_case, max_input_chars_per_word=max_input_chars_per_word
        )
        self.built = True

    def call(self, inputs):
        if isinstance(inputs, (tuple, list)):
            if len(inputs) != 2:
                raise ValueError(
                    f"Give one string tensor or a pair (texts, text_pairs). Received {len(inputs)} inputs."
                )
            texts, pairs = inputs
            return self.tokenizer.pack(
                self.tokenizer(_rows(texts, "texts")),
                self.tokenizer(_rows(pairs, "text_pairs")),
                self.max_length,
            )
        return self.tokenizer.pack(self.tokenizer(_rows(inputs, "inputs")), None, self.max_length)


def _rows(strings, name):
    """One string per example: a scalar, `(B,)` or Keras' `(B, 1)`; a wider
    batch would silently become more rows than labels, so it is refused."""
    if isinstance(strings, (list, tuple)):
        check_texts(keras.tree.flatten(strings), name)
    strings = tf.convert_to_tensor(strings)
    if strings.dtype != tf.string:
        raise TypeError(f"`{name}` must be strings (a tf.string tensor, or str / bytes). "
                        f"Received a tensor of dtype {strings.dtype.name}, shape "
                        f"{tuple(strings.shape)}.")
    shape = strings.shape
    if shape.rank is not None and (shape.rank > 2 or (shape.rank == 2 and shape[-1] not in (1, None))):
        raise ValueError(
            f"`{name}` must hold one string per example: shape (batch,) or (batch, 1). "
            f"Received shape {tuple(shape)}.")
    if shape.rank == 2 and shape[-1] is None:
        tf.debugging.assert_equal(tf.shape(strings)[-1], 1, message=(
            f"`{name}` must hold one string per example: shape (batch,) or (batch, 1)."))
    return tf.reshape(strings, [-1])  # (B,)

"""Tokens -> ELMo character ids, as bilm-tf's `Batcher` (Python and TF graph).

A token is its UTF-8 bytes (0..255), truncated to `max_chars - 2` bytes
(bytes, not characters: a multi-byte character may be cut, as bilm-tf
does), wrapped in begin-of-word 258 / end-of-word 259 and padded with 260.
Sentences are wrapped in `<S>` / `</S>` tokens, whose ids are
`[258, 256 (or 257), 259, 260, ...]`. Every id is then shifted by +1 so that
0 marks a padding token (bilm-tf's inference layout, 262 ids). A literal
`<S>` or `</S>` token gets the boundary ids too: bilm-tf's vocabularies
must hold both, and `UnicodeCharsVocabulary` maps them so.

`batch_char_ids` is the Python path (data preparation, tests);
`char_ids_from_tokens` the same rules as TensorFlow ops, so a SavedModel
can take raw tokens. `token_char_ids` / `tf_token_char_ids` do one token
at a time, adding no boundaries (bilm-tf's training windows).
"""

import numpy as np
import tensorflow as tf

# B=batch, T=tokens (without the boundaries), C=max_chars

BOS_CHAR = 256  # begin of sentence
EOS_CHAR = 257  # end of sentence
BOW_CHAR = 258  # begin of word
EOW_CHAR = 259  # end of word
PAD_CHAR = 260  # after the end of word
BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"


def _check_max_chars(max_chars):
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 3:
        raise ValueError(
            "`max_chars` must be an integer >= 3 (begin-of-word, one byte, end-of-word). "
            f"Received: max_chars={max_chars!r}.")


def _boundary_ids(char, max_chars):
    row = np.full((max_chars,), PAD_CHAR + 1, np.int32)
    row[:3] = (BOW_CHAR + 1, char + 1, EOW_CHAR + 1)
    return row


def _word_ids(token, max_chars):
    if token == BOS_TOKEN:
        return _boundary_ids(BOS_CHAR, max_chars)
    if token == EOS_TOKEN:
        return _boundary_ids(EOS_CHAR, max_chars)
    row = np.full((max_chars,), PAD_CHAR + 1, np.int32)
    data = token.encode("utf-8", "ignore")[:max_chars - 2]
    row[0] = BOW_CHAR + 1
    row[1:len(data) + 1] = np.frombuffer(data, np.uint8).astype(np.int32) + 1
    row[len(data) + 1] = EOW_CHAR + 1
    return row


def token_char_ids(tokens, max_chars=50):
    """Character ids of a list of tokens, no sentence boundaries added.

    For text already wrapped (bilm-tf's training packs `<S> ... </S>`
    sentences into fixed windows).

    Args:
        tokens: list of str.
        max_chars: int. Ids per token (C).

    Returns:
        int32 `(len(tokens), C)`, every id >= 1.

    Example:
    >>> token_char_ids(["Hi"], max_chars=5)
    array([[259,  73, 106, 260, 261]], dtype=int32)
    """
    _check_max_chars(max_chars)
    for token in tokens:
        if not isinstance(token, str):
            raise ValueError(f"Tokens must be str. Received: {token!r} ({type(token).__name__}).")
    if not tokens:
        return np.zeros((0, max_chars), np.int32)
    return np.stack([_word_ids(t, max_chars) for t in tokens])


def batch_char_ids(sentences, max_chars=50):
    """Character ids of a batch of tokenized sentences, as bilm-tf's `Batcher`.

    Each sentence is wrapped in `<S>` / `</S>` and rows are padded with 0
    (whole padding tokens) to the longest.

    Args:
        sentences: list of lists of str, without `<S>` / `</S>`.
        max_chars: int. Ids per token (C), bilm-tf's
            `max_characters_per_token`.

    Returns:
        int32 `(B, T + 2, C)` with T the longest sentence's length.

    Example:
    >>> batch_char_ids([["The", "cat"], ["Hi"]]).shape
    (2, 4, 50)
    """
    _check_max_chars(max_chars)
    if isinstance(sentences, str) or not len(sentences):
        raise ValueError(
            "`sentences` must be a non-empty list of token lists. "
            f"Received: {sentences!r}.")
    for sentence in sentences:
        if isinstance(sentence, str):
            raise ValueError(
                f"Each sentence must be a list of tokens, not a str. Received: {sentence!r}; "
                "split it first.")
    length = max(len(s) for s in sentences) + 2
    ids = np.zeros((len(sentences), length, max_chars), np.int32)
    for k, sentence in enumerate(sentences):
        ids[k, :len(sentence) + 2] = token_char_ids(
            [BOS_TOKEN, *sentence, EOS_TOKEN], max_chars)
    return ids


def char_ids_from_tokens(tokens, max_chars=50):
    """`batch_char_ids` as TensorFlow ops (for SavedModels and tf.data).

    Args:
        tokens: string `tf.RaggedTensor` `(B, None)` of UTF-8 tokens (or a
            nested list of str), without `<S>` / `</S>`.
        max_chars: int. Ids per token (C).

    Returns:
        int32 `tf.Tensor` `(B, T + 2, C)`, equal to
        `batch_char_ids(tokens, max_chars)`.

    Example:
    >>> char_ids_from_tokens(tf.ragged.constant([["The", "cat"], ["Hi"]])).shape
    TensorShape([2, 4, 50])
    """
    _check_max_chars(max_chars)
    if not isinstance(tokens, tf.RaggedTensor):
        tokens = tf.ragged.constant(tokens, dtype=tf.string, ragged_rank=1)
    if tokens.shape.rank != 2 or tokens.dtype != tf.string:
        raise ValueError(
            "`tokens` must be a rank-2 string RaggedTensor (sentences of tokens). "
            f"Received: dtype={tokens.dtype.name}, shape={tokens.shape}.")
    ids = tf_token_char_ids(tokens.flat_values, max_chars)  # (N, C) every token of the batch
    ids = tokens.with_flat_values(ids)  # (B, None, C)
    bos, eos = (tf.constant(_boundary_ids(char, max_chars)) for char in (BOS_CHAR, EOS_CHAR))
    batch = tokens.nrows()
    wrapped = tf.concat([
        tf.RaggedTensor.from_tensor(tf.tile(bos[None, None, :], [batch, 1, 1])),
        ids,
        tf.RaggedTensor.from_tensor(tf.tile(eos[None, None, :], [batch, 1, 1])),
    ], axis=1)  # (B, None, C)
    return wrapped.to_tensor(default_value=0, shape=[None, None, max_chars])


def tf_token_char_ids(tokens, max_chars=50):
    """`token_char_ids` as TensorFlow ops: each token's ids, no boundaries added.

    For tokens already in place (bilm-tf's training windows, whose `<S>` and
    `</S>` are tokens of the stream; those two get the boundary ids).

    Args:
        tokens: string `tf.Tensor` of any shape (...) of UTF-8 tokens.
        max_chars: int. Ids per token (C).

    Returns:
        int32 `(..., C)`, every id >= 1; row for row `token_char_ids`.

    Example:
    >>> tf_token_char_ids(tf.constant(["Hi"]), max_chars=5).numpy()
    array([[259,  73, 106, 260, 261]], dtype=int32)
    """
    _check_max_chars(max_chars)
    tokens = tf.convert_to_tensor(tokens, tf.string)
    words = tf.reshape(tokens, [-1])  # (N,)
    # Bytes 0..255, truncated (or zero-padded) to C - 2, as bilm-tf's
    # `word.encode('utf-8')[:max_chars - 2]`.
    data = tf.cast(tf.io.decode_raw(words, tf.uint8, fixed_length=max_chars - 2), tf.int32)
    length = tf.minimum(tf.strings.length(words), max_chars - 2)  # (N,) bytes kept
    position = tf.range(max_chars)[None, :]  # (1, C)
    length = length[:, None]  # (N, 1)
    padded = tf.pad(data, [[0, 0], [1, 1]])  # (N, C): byte p - 1 at position p
    ids = tf.where(position == 0, BOW_CHAR,
                   tf.where(position <= length, padded,
                            tf.where(position == length + 1, EOW_CHAR, PAD_CHAR)))  # (N, C)
    bos, eos = (tf.constant(_boundary_ids(char, max_chars) - 1) for char in (BOS_CHAR, EOS_CHAR))
    ids = tf.where((words == BOS_TOKEN)[:, None], bos[None, :], ids)
    ids = tf.where((words == EOS_TOKEN)[:, None], eos[None, :], ids) + 1  # (N, C), 0 = padding
    return tf.reshape(ids, tf.concat([tf.shape(tokens), [max_chars]], axis=0))  # (..., C)

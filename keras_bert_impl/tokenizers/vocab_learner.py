"""Learning a WordPiece vocabulary from text.

Words are counted with our own BasicTokenizer (the in-graph one, batched),
so the vocabulary is learned on exactly the words the tokenizer will later
split; the WordPiece learning itself is tensorflow-text's
`wordpiece_tokenizer_learner_lib.learn`, the established implementation.
"""

import collections
import os
import tempfile

import tensorflow as tf
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib

from keras_bert_impl.tokenizers.graph_tokenizer import basic_tokenize


def reserved_tokens(num_unused=99):
    """`[PAD]`, `[unused0..]`, `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]`.

    With the default 99 unused slots the special ids are the original
    release's: [PAD]=0, [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103.
    """
    unused = [f"[unused{i}]" for i in range(num_unused)]
    return ["[PAD]", *unused, "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def count_words(texts, do_lower_case=True, batch_size=1024):
    """Counter of BasicTokenizer words over an iterable of strings."""
    counts = collections.Counter()
    batch = []

    def flush():
        words = basic_tokenize(tf.constant(batch), do_lower_case).flat_values.numpy()
        counts.update(w.decode("utf-8") for w in words)
        batch.clear()

    for text in texts:
        batch.append(text)
        if len(batch) == batch_size:
            flush()
    if batch:
        flush()
    return counts


def learn_vocab(texts, vocab_size=30522, do_lower_case=True, num_unused=99, max_token_length=50):
    """A WordPiece vocabulary (list of tokens, id = position) for `texts`."""
    reserved = reserved_tokens(num_unused)
    if vocab_size <= len(reserved):
        raise ValueError(
            f"`vocab_size`={vocab_size} leaves no room after {len(reserved)} reserved tokens."
        )
    counts = count_words(texts, do_lower_case)
    if not counts:
        raise ValueError("No words in the input: cannot learn a vocabulary.")
    vocab = wordpiece_tokenizer_learner_lib.learn(
        counts.items(),
        vocab_size=vocab_size,
        reserved_tokens=reserved,
        lower_thresh=1,
        max_token_length=max_token_length,
    )
    return list(vocab)


def write_vocab(tokens, path):
    """Writes `vocab.txt` atomically (temp file, then rename)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".txt")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("".join(token + "\n" for token in tokens))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise

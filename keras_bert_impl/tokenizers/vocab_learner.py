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


def learn_vocab(texts, vocab_size=30522, do_lower_case=True, num_unused=99, max_token_length=50,
                on_round=None):
    """A WordPiece vocabulary (list of tokens, id = position) for `texts`.

    `on_round`: see `learn_from_counts`.
    """
    reserved = reserved_tokens(num_unused)
    if vocab_size <= len(reserved):
        raise ValueError(
            f"`vocab_size`={vocab_size} leaves no room after {len(reserved)} reserved tokens."
        )
    counts = count_words(texts, do_lower_case)
    if not counts:
        raise ValueError("No words in the input: cannot learn a vocabulary.")
    return learn_from_counts(counts, vocab_size, reserved, max_token_length, on_round)


def learn_from_counts(counts, vocab_size, reserved, max_token_length=50, on_round=None):
    """tensorflow-text's `wordpiece_tokenizer_learner_lib.learn` (its
    defaults, but words seen once are kept), with its binary search over
    the count threshold written out as a loop so that each round can be
    reported: the learning is most of a small vocabulary's time, and a
    round (one vocabulary at one threshold) takes seconds on a large corpus.

    Args:
        counts: `{word: count}`.
        vocab_size: int. Most tokens, reserved ones included.
        reserved: list of str. Tokens first in the vocabulary.
        max_token_length: int. Longer words are left out.
        on_round: None, or callable `(round, max_rounds, threshold, size)`
            after each round of the search: its 1-based number, the most
            rounds the search can take, the count threshold tried and the
            size of the vocabulary it gave.
    """
    if vocab_size <= len(reserved):
        raise ValueError(
            f"`vocab_size`={vocab_size} leaves no room after {len(reserved)} reserved tokens."
        )
    lib = wordpiece_tokenizer_learner_lib
    params = lib.Params(upper_thresh=int(1e7), lower_thresh=1, num_iterations=4,
                        max_input_tokens=int(5e6), max_token_length=max_token_length,
                        max_unique_chars=1000, vocab_size=vocab_size, slack_ratio=0.05,
                        include_joiner_token=True, joiner="##", reserved_tokens=reserved)
    word_counts = list(counts.items())
    upper, lower = lib.get_search_threshs(word_counts, params.upper_thresh, params.lower_thresh)
    all_counts = lib.get_input_words(word_counts, params.reserved_tokens, params.max_token_length)
    allowed = lib.get_allowed_chars(all_counts, params.max_unique_chars)
    filtered = lib.filter_input_words(all_counts, allowed, params.max_input_tokens)
    # A binary search over [lower, upper] ends within this many rounds.
    max_rounds = max(upper - lower + 1, 1).bit_length()
    slack = max(params.slack_ratio * vocab_size, 0)
    for round_number in range(1, max_rounds + 2):
        threshold = (upper + lower) // 2
        vocab = lib.learn_with_thresh(filtered, threshold, params)
        if on_round is not None:
            on_round(round_number, max_rounds, threshold, len(vocab))
        if (len(vocab) <= vocab_size and vocab_size - len(vocab) <= slack) or (
                lower >= upper or threshold <= 1):
            break
        if len(vocab) > vocab_size:
            lower = threshold + 1
        else:
            upper = threshold - 1
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

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
    first = _first_iteration(filtered, params)
    for round_number in range(1, max_rounds + 2):
        threshold = (upper + lower) // 2
        vocab = _learn_with_thresh(filtered, first, threshold, params)
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


# tensorflow-text's `learn_with_thresh` recounts every substring of every
# word (its first iteration) in each round of the binary search, though that
# iteration does not depend on the threshold: its counts and the decrements
# of their prefixes are the same for every threshold, and only the choice of
# the tokens at or over it differs. Counting them once and filtering per
# round gives the library's vocabulary exactly (tested against it) in about
# a third of the time; the later iterations are the library's loop.


def _count_subtokens(word_counts, curr_tokens, params):
    """Counts of the substrings the library's iteration counts: every
    substring (`curr_tokens` None), or those starting where `curr_tokens`
    split a word."""
    lib = wordpiece_tokenizer_learner_lib
    subtokens = [dict() for _ in range(params.max_token_length + 1)]
    joiner = params.joiner if params.include_joiner_token else ""
    for word, count in word_counts:
        if curr_tokens is None:
            split_indices = range(1, len(word) + 1)
        elif word in curr_tokens:  # the library's first try, without its call: one piece
            split_indices = (len(word),)
        else:
            split_indices = lib.get_split_indices(word, curr_tokens, params.include_joiner_token,
                                                  params.joiner)
            if not split_indices:
                continue
        start = 0
        for index in split_indices:
            prefix = joiner if start > 0 else ""
            for end in range(start + 1, len(word) + 1):
                table = subtokens[end - start]
                subtoken = prefix + word[start:end]
                table[subtoken] = table.get(subtoken, 0) + count
            start = index
    return subtokens


def _visit_longest_first(subtokens, params):
    """`[(token, count)]` in the library's order (longest first), each count
    after the longer tokens' decrements of their prefixes.

    The library visits the tokens longest first and takes each one's count
    (after the decrements so far) off every shorter prefix of it in the
    tables. A prefix `p` therefore loses, over its longer extensions `u`,
    the sum of `count(u) - loss(u)`; grouping them by their one-character
    extension `c` of `p` (every counted token's prefixes are counted: they
    share its start), each group sums to `count(c) - loss(c) + loss(c)`, so
    `p`'s count after the decrements is its own count less those of its
    one-character extensions. That takes one pass over the tables instead
    of a pass over every prefix of every token.
    """
    extensions = [{} for _ in range(params.max_token_length + 1)]
    for length in range(2, params.max_token_length + 1):
        shorter = extensions[length - 1]
        for token, count in subtokens[length].items():
            prefix = token[:-1]  # with the joiner, if the token has it
            shorter[prefix] = shorter.get(prefix, 0) + count
    visited = []
    for length in range(params.max_token_length, 0, -1):
        lost = extensions[length]
        visited.extend((token, count - lost.get(token, 0))
                       for token, count in subtokens[length].items())
    return visited


def _first_iteration(word_counts, params):
    return _visit_longest_first(_count_subtokens(word_counts, None, params), params)


def _learn_with_thresh(word_counts, first, thresh, params):
    """`wordpiece_tokenizer_learner_lib.learn_with_thresh`, its first
    iteration taken from `first` (`_first_iteration`)."""
    lib = wordpiece_tokenizer_learner_lib
    char_tokens = lib.extract_char_tokens(word_counts)
    curr_tokens = None
    for iteration in range(params.num_iterations):
        if iteration == 0:
            visited = first
        else:
            visited = _visit_longest_first(_count_subtokens(word_counts, curr_tokens, params),
                                           params)
        next_tokens = {token: count for token, count in visited if count >= thresh}
        curr_tokens = lib.ensure_all_tokens_exist(char_tokens, next_tokens,
                                                  params.include_joiner_token, params.joiner)
    return lib.generate_final_vocabulary(params.reserved_tokens, char_tokens, curr_tokens)


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

"""Learning a WordPiece vocabulary from text.

Words are counted with our own BasicTokenizer (the in-graph one, batched),
so the vocabulary is learned on exactly the words the tokenizer will later
split; the WordPiece learning itself is tensorflow-text's
`wordpiece_tokenizer_learner_lib.learn`, the established implementation.
"""

import collections
import os

import tensorflow as tf
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib

from keras_bert_impl.base.json_files import write_text_atomic
from keras_bert_impl.tokenizers.graph_basic_tokenizer import basic_tokenize


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
    first = _first_iteration(filtered)
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


# tensorflow-text's `learn_with_thresh`, in each of its iterations (and in
# each round of the binary search), counts every substring that starts
# where the current tokens split a word (at 0 and after each piece, the
# later ones with the joiner) in tables by length, visits the tables
# longest first taking each token's count (after the decrements so far) off
# its shorter prefixes, and keeps the tokens whose count is still at or
# over the threshold. What it keeps needs no tables:
#
# - A prefix `p` loses, over its longer extensions `u`, the sum of
#   `count(u) - loss(u)`. Grouped by the one-character extension `c` of `p`
#   they extend (every counted substring's prefixes are counted: they share
#   its start), each group sums to `count(c)`. So `p` keeps its own count
#   less its one-character extensions' counts: the number of times `p` was
#   a whole rest of a word, from a split to the word's end.
# - So a token is kept when a word is exactly it (its start substrings) or
#   when, with the joiner, it is the rest of a word after a split, at least
#   `thresh` times. Substrings that are only prefixes keep 0 and the
#   threshold is at least 1.
# - Word starts and joined rests share no key of a table (a table of length
#   n holds n-character starts and (n + 2)-character joined rests); where
#   both give the same string, the joined one's table is shorter, visited
#   later, and its count replaces the start's. Without a joiner they share
#   keys and their counts add.
#
# A word the tokens cannot split is skipped, starts and all; that cannot
# happen (every character is a token, with and without the joiner) but is
# followed anyway. The vocabularies are the library's exactly (tested
# against it at every threshold, with and without the joiner).


def _first_iteration(word_counts):
    """What every round shares: the counts of the words (every iteration's
    starts) and of every rest of a word (the first iteration's)."""
    words, rests = collections.Counter(), collections.Counter()
    for word, count in word_counts:
        words[word] += count
        for start in range(1, len(word)):
            rests[word[start:]] += count
    return {"words": words, "rests": rests}


def _rests(word_counts, curr_tokens, params):
    """Counts of the rests of the words after each piece `curr_tokens` split
    them into but the last, and the words it could not split."""
    rests = collections.Counter()
    unsplit = set()
    split = _splitter(curr_tokens, params)
    for word, count in word_counts:
        if word in curr_tokens:  # one piece: the library's first try
            continue
        indices = split(word)
        if not indices:
            unsplit.add(word)
            continue
        for start in indices[:-1]:
            rests[word[start:]] += count
    return rests, unsplit


def _splitter(curr_tokens, params):
    """The library's `get_split_indices(word, curr_tokens, ...)` as a
    function of `word`: greedy longest match, the same indices, but each
    piece tried from the longest token's length down, not from the whole
    rest of the word (nothing longer is a token)."""
    joiner = params.joiner if params.include_joiner_token else ""
    # Pieces after the start, without the joiner: `joiner + piece in curr_tokens`.
    later = {token[len(joiner):] for token in curr_tokens if token.startswith(joiner)}
    first_longest = max(map(len, curr_tokens), default=0)
    later_longest = max(map(len, later), default=0)

    def split(word):
        indices = []
        start = 0
        tokens, longest = curr_tokens, first_longest
        while start < len(word):
            end = min(len(word), start + longest)
            while end > start and word[start:end] not in tokens:
                end -= 1
            if end == start:
                return None
            indices.append(end)
            start = end
            tokens, longest = later, later_longest
        return indices

    return split


def _kept(words, rests, thresh, params):
    """The tokens an iteration keeps, with their counts (see above)."""
    if not params.include_joiner_token:
        return {token: count for token, count in (words + rests).items() if count >= thresh}
    kept = {word: count for word, count in words.items() if count >= thresh}
    kept.update((params.joiner + rest, count) for rest, count in rests.items()
                if count >= thresh)
    return kept


def _learn_with_thresh(word_counts, first, thresh, params):
    """`wordpiece_tokenizer_learner_lib.learn_with_thresh`, from the counts
    every round shares (`_first_iteration`)."""
    lib = wordpiece_tokenizer_learner_lib
    char_tokens = lib.extract_char_tokens(word_counts)
    curr_tokens = None
    for iteration in range(params.num_iterations):
        words, rests = first["words"], first["rests"]
        if iteration > 0:
            rests, unsplit = _rests(word_counts, curr_tokens, params)
            if unsplit:
                words = collections.Counter(
                    {word: count for word, count in words.items() if word not in unsplit})
        next_tokens = _kept(words, rests, thresh, params)
        curr_tokens = lib.ensure_all_tokens_exist(char_tokens, next_tokens,
                                                  params.include_joiner_token, params.joiner)
    return lib.generate_final_vocabulary(params.reserved_tokens, char_tokens, curr_tokens)


def write_vocab(tokens, path):
    """Writes `vocab.txt` atomically (temp file, then rename)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_text_atomic(path, "".join(token + "\n" for token in tokens), ".txt")

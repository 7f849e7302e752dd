"""Masked-LM masking of a whole block of instances at once, in numpy.

The writer's default. Same rules as `instances.create_masked_lm_predictions`
(the original's): candidates are every token but [CLS]/[SEP];
`num_to_predict = min(P, max(1, round(len * masked_lm_prob)))` with `len`
counting [CLS]/[SEP]; candidate words are visited in a random order and a
word is taken if it fits the remaining budget (so with whole-word masking a
long word that would overshoot is skipped, as the original); each taken
token becomes [MASK] with probability 0.8, else stays with 0.5, else a
random id. Whole-word grouping also follows the original: a "##" piece joins
the previous candidate word, even across [SEP]; so does a token flagged in
`word_continues` (a segmented Chinese word's later character,
`chinese_words.py`).

Only the random stream differs: one numpy generator for the block instead
of per-token `random.Random` draws, which is what makes it ~10x faster than
the original's loop. `InstanceConfig(original_rng=True)` keeps the per-token
draws (and so the original script's exact records).
"""

import itertools

import numpy as np

# N=instances, S=sequence, W=candidate words, P=max predictions


def pack_instances(instances, max_seq_length):
    """Instances -> `(input_ids, input_mask, segment_ids, next_sentence_labels)`,
    int32 arrays `(N, S)` (labels `(N,)`), padded with 0."""
    n = len(instances)
    lengths = np.fromiter((len(i.token_ids) for i in instances), np.int64, n)
    mask = np.arange(max_seq_length)[None, :] < lengths[:, None]
    ids = np.zeros((n, max_seq_length), np.int32)
    ids[mask] = np.fromiter(
        itertools.chain.from_iterable(i.token_ids for i in instances), np.int32, int(lengths.sum()))
    a_lengths = np.fromiter((i.a_length for i in instances), np.int64, n)
    segments = (mask & (np.arange(max_seq_length)[None, :] >= a_lengths[:, None])).astype(np.int32)
    labels = np.fromiter((i.is_random_next for i in instances), np.int32, n)
    return ids, mask.astype(np.int32), segments, labels


def pack_predictions(instances, max_predictions_per_seq):
    """The instances' own masks -> `(positions, label_ids, weights)`, `(N, P)`."""
    n, p = len(instances), max_predictions_per_seq
    counts = np.fromiter((len(i.masked_lm_positions) for i in instances), np.int64, n)
    valid = np.arange(p)[None, :] < counts[:, None]
    positions = np.zeros((n, p), np.int32)
    label_ids = np.zeros((n, p), np.int32)
    positions[valid] = np.fromiter(
        itertools.chain.from_iterable(i.masked_lm_positions for i in instances), np.int32,
        int(counts.sum()))
    label_ids[valid] = np.fromiter(
        itertools.chain.from_iterable(i.masked_lm_ids for i in instances), np.int32,
        int(counts.sum()))
    return positions, label_ids, valid.astype(np.float32)


def mask_block(input_ids, input_mask, config, vocab, rng, word_continues=None):
    """Masks unmasked `(N, S)` ids; returns `(masked_ids, positions, label_ids, weights)`.

    Args:
        input_ids, input_mask: int arrays `(N, S)`.
        config: `InstanceConfig` (max_predictions_per_seq, masked_lm_prob,
            do_whole_word_mask, random_token_excludes_special).
        vocab: `VocabInfo`.
        rng: `np.random.Generator`.
        word_continues: optional bool `(N, S)`, whole-word masking only:
            True where a token continues the word before it although it is
            no "##" piece (Chinese words, `chinese_words.split_marks`).
    """
    n, s = input_ids.shape
    p = config.max_predictions_per_seq
    k = min(p, s)
    real = input_mask.astype(bool)
    candidate = real & (input_ids != vocab.cls_id) & (input_ids != vocab.sep_id)
    # np.round is half-to-even, as Python's round.
    budget = np.minimum(p, np.maximum(1, np.round(real.sum(axis=1) * config.masked_lm_prob)))
    if word_continues is not None and not config.do_whole_word_mask:
        raise ValueError("`word_continues` groups tokens into words: it needs "
                         "`do_whole_word_mask=True`.")
    if config.do_whole_word_mask:
        positions = _whole_word_positions(
            input_ids, candidate, budget, vocab, rng, word_continues)  # (N, <=k)
    else:
        # One-token words: the first `budget` candidates of a random order.
        keys = np.where(candidate, rng.random((n, s)), 2.0)
        if k < s:
            smallest = np.argpartition(keys, k - 1, axis=1)[:, :k]  # (N, k), unordered
        else:
            smallest = np.broadcast_to(np.arange(s), (n, s))
        ranked = np.take_along_axis(
            smallest, np.argsort(np.take_along_axis(keys, smallest, axis=1), axis=1), axis=1)
        chosen = (np.arange(k)[None, :] < budget[:, None]) & (
            np.take_along_axis(keys, ranked, axis=1) < 2)
        positions = np.sort(np.where(chosen, ranked, s), axis=1)  # ascending, `s` = none
    valid = positions < s
    positions = np.where(valid, positions, 0)
    label_ids = np.where(valid, np.take_along_axis(input_ids, positions, axis=1), 0)

    action = rng.random(positions.shape)
    keep = rng.random(positions.shape) < 0.5
    if config.random_token_excludes_special:
        allowed = np.setdiff1d(np.arange(vocab.vocab_size), np.fromiter(vocab.special_ids, np.int64))
        random_ids = allowed[rng.integers(0, len(allowed), positions.shape)]
    else:
        random_ids = rng.integers(0, vocab.vocab_size, positions.shape)
    shown = np.where(action < 0.8, vocab.mask_id, np.where(keep, label_ids, random_ids))
    masked_ids = np.array(input_ids, np.int32)
    # Unused slots point at position 0 ([CLS]) and write back its own id.
    np.put_along_axis(masked_ids, positions, np.where(valid, shown, input_ids[:, :1]), axis=1)
    pad = ((0, 0), (0, p - positions.shape[1]))
    return (masked_ids, np.pad(positions, pad).astype(np.int32),
            np.pad(label_ids, pad).astype(np.int32), np.pad(valid, pad).astype(np.float32))


def _whole_word_positions(input_ids, candidate, budget, vocab, rng, word_continues=None):
    """Whole-word choice: `(N, min(P, S))` ascending positions, `S` = none."""
    n, s = input_ids.shape
    is_subword = np.asarray(vocab.is_subword, bool)
    first = candidate & (np.cumsum(candidate, axis=1) == 1)
    joins = is_subword[input_ids]  # (N, S) joins the candidate word before it
    if word_continues is not None:
        joins = joins | word_continues
    starts = candidate & (~joins | first)
    word = np.cumsum(starts, axis=1) - 1  # (N, S) word index of each candidate
    num_words = starts.sum(axis=1)
    w = max(int(num_words.max()) if n else 0, 1)
    rows = np.broadcast_to(np.arange(n)[:, None], (n, s))
    word_length = np.bincount(
        (rows * w + word)[candidate], minlength=n * w).reshape(n, w)  # (N, W)
    keys = rng.random((n, w))
    keys[np.arange(w)[None, :] >= num_words[:, None]] = np.inf  # no such word
    order = np.argsort(keys, axis=1)  # (N, W) words in random order
    ranked_length = np.take_along_axis(word_length, order, axis=1)
    taken_ranked = np.zeros((n, w), bool)
    count = np.zeros(n, np.int64)
    # Greedy over the random order: a word is taken if it fits what is left.
    for r in range(w):
        fits = (ranked_length[:, r] > 0) & (count + ranked_length[:, r] <= budget)
        taken_ranked[:, r] = fits
        count += np.where(fits, ranked_length[:, r], 0)
    taken = np.zeros((n, w), bool)
    np.put_along_axis(taken, order, taken_ranked, axis=1)
    masked = candidate & np.take_along_axis(taken, np.maximum(word, 0), axis=1)
    k = min(int(budget.max()) if n else 1, s)
    return np.sort(np.where(masked, np.arange(s)[None, :], s), axis=1)[:, :k]

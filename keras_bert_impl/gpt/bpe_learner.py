"""Learning GPT's byte-pair-encoding merges from text.

The algorithm of Sennrich et al. 2016 ("Neural Machine Translation of Rare
Words with Subword Units"), on the words `GptTokenizer` will see: count the
words (our in-graph GPT BasicTokenizer, batched), spell each as characters
with "</w>" on the last, then repeatedly merge the most frequent adjacent
pair into a new symbol. Pair counts are kept up to date incrementally (only
the words holding the merged pair are recounted) and the best pair comes
from a heap, so each merge costs the words it touches, not the corpus.
Ties go to the smallest pair in string order, so results are reproducible.

The files follow openai-gpt's layout: `vocab.json` holds the characters
(most frequent first), the same characters with "</w>", the merged symbols
in merge order, then "<unk>"; `merges.txt` a "#version" line, then one
merge a line, in order.
"""

import collections
import heapq
import json
import os

import tensorflow as tf

from keras_bert_impl.base.json_files import write_text_atomic
from keras_bert_impl.gpt.gpt_tokenizer import END_OF_WORD
from keras_bert_impl.gpt.gpt_tokenizer import UNK_TOKEN
from keras_bert_impl.gpt.gpt_tokenizer import merge_pair
from keras_bert_impl.gpt.graph_gpt_tokenizer import gpt_basic_tokenize

MERGES_HEADER = "#version: 0.2"


def count_words(lines, batch_size=1024):
    """Counter of GPT BasicTokenizer words over an iterable of strings."""
    counts = collections.Counter()
    batch = []

    def flush():
        words = gpt_basic_tokenize(tf.constant(batch)).flat_values.numpy()
        counts.update(w.decode("utf-8") for w in words)
        batch.clear()

    for line in lines:
        batch.append(line)
        if len(batch) == batch_size:
            flush()
    if batch:
        flush()
    return counts


def learn_merges(word_counts, num_merges, min_frequency=2, on_merge=None):
    """The first `num_merges` BPE merges of a `{word: count}` mapping.

    Stops early when the best pair occurs fewer than `min_frequency` times.
    Returns a list of `(left, right)` pairs in merge order.

    `on_merge`: None, or callable `(merges, num_merges, count)` called
    after each merge learned: how many so far, the most there can be (the
    learning may stop before) and how often the merged pair occurred.
    """
    words = [[*w[:-1], w[-1] + END_OF_WORD] for w in word_counts]
    freqs = list(word_counts.values())
    pair_counts = collections.Counter()
    holders = collections.defaultdict(set)  # pair -> indices of words that may hold it
    for index, (symbols, freq) in enumerate(zip(words, freqs)):
        for pair in zip(symbols, symbols[1:]):
            pair_counts[pair] += freq
            holders[pair].add(index)
    heap = [(-count, pair) for pair, count in pair_counts.items()]
    heapq.heapify(heap)
    merges, seen = [], set()
    while heap and len(merges) < num_merges:
        negative_count, pair = heapq.heappop(heap)
        count = pair_counts.get(pair, 0)
        if count != -negative_count or count == 0:
            continue  # stale heap entry: the count changed since
        if count < min_frequency:
            break
        if pair not in seen:  # a symbol spelled by two merges can repeat a pair
            seen.add(pair)
            merges.append(pair)
            if on_merge is not None:
                on_merge(len(merges), num_merges, count)
        changed = set()
        for index in holders.pop(pair, ()):
            symbols = words[index]
            merged = merge_pair(symbols, *pair)
            if len(merged) == len(symbols):
                continue
            freq = freqs[index]
            for old in zip(symbols, symbols[1:]):
                pair_counts[old] -= freq
                changed.add(old)
            for new in zip(merged, merged[1:]):
                pair_counts[new] += freq
                holders[new].add(index)
                changed.add(new)
            words[index] = merged
        for changed_pair in changed:
            if pair_counts[changed_pair] > 0:
                heapq.heappush(heap, (-pair_counts[changed_pair], changed_pair))
            else:
                del pair_counts[changed_pair]
    return merges


def learn_bpe(lines, vocab_size=None, num_merges=None, min_frequency=2):
    """Learns a GPT BPE vocabulary from an iterable of strings.

    Args:
        lines: iterable of str.
        vocab_size: int. Largest vocabulary: characters, their "</w>"
            forms and "<unk>" first, merges fill the rest. Give this or
            `num_merges`.
        num_merges: int. Number of merges to learn instead.
        min_frequency: int. Pairs seen fewer times are never merged.

    Returns:
        `(vocab, merges)`: dict token -> id in openai-gpt's layout, and the
        list of `(left, right)` merges in order.
    """
    _check_sizes(vocab_size, num_merges)
    return bpe_from_counts(count_words(lines), vocab_size, num_merges, min_frequency)


def _check_sizes(vocab_size, num_merges):
    if (vocab_size is None) == (num_merges is None):
        raise ValueError(
            "Give exactly one of `vocab_size` and `num_merges`. "
            f"Received: vocab_size={vocab_size}, num_merges={num_merges}."
        )


def bpe_from_counts(counts, vocab_size=None, num_merges=None, min_frequency=2, on_merge=None):
    """`learn_bpe` on words already counted (`count_words`), so a caller
    can show the counting's progress and then the merges' (`on_merge`: see
    `learn_merges`). The other arguments and the result are `learn_bpe`'s.
    """
    _check_sizes(vocab_size, num_merges)
    if not counts:
        raise ValueError("No words in the input: cannot learn a vocabulary.")
    char_counts = collections.Counter()
    for word, count in counts.items():
        for char in word:
            char_counts[char] += count
    alphabet = sorted(char_counts, key=lambda c: (-char_counts[c], c))
    base = [*alphabet, *(c + END_OF_WORD for c in alphabet)]
    if num_merges is None:
        num_merges = vocab_size - len(base) - 1
        if num_merges < 0:
            raise ValueError(
                f"`vocab_size`={vocab_size} is smaller than the {len(alphabet)} characters, "
                f"their {len(alphabet)} '</w>' forms and <unk> ({len(base) + 1} tokens); "
                "raise it or learn from less varied text."
            )
    merges = learn_merges(counts, num_merges, min_frequency, on_merge)
    tokens = base + [a + b for a, b in merges] + [UNK_TOKEN]
    vocab = {}
    for token in tokens:  # a symbol spelled by two merges is listed once
        vocab.setdefault(token, len(vocab))
    return vocab, merges


def write_bpe_files(vocab, merges, folder):
    """Writes `vocab.json` and `merges.txt` in `folder`, each atomically
    (temp file, then rename). Returns their paths."""
    os.makedirs(folder, exist_ok=True)
    vocab_path = os.path.join(folder, "vocab.json")
    merges_path = os.path.join(folder, "merges.txt")
    write_text_atomic(vocab_path, json.dumps(vocab, ensure_ascii=False) + "\n")
    lines = [MERGES_HEADER] + [f"{left} {right}" for left, right in merges]
    write_text_atomic(merges_path, "\n".join(lines) + "\n")
    return vocab_path, merges_path


_write_atomically = write_text_atomic  # the name tests/test_serving.py imports

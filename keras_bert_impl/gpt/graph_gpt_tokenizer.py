"""`GraphGptTokenizer`: `GptTokenizer`'s ids in the TF graph.

Core TF ops only (RE2 regular expressions, ICU lowercasing, tensorflow-text
normalization via BERT's in-graph BasicTokenizer, hash tables and a
`tf.while_loop`), so it runs inside `tf.data` and a SavedModel signature.

BPE runs on the batch's distinct words at once (`tf.unique` stands in for
the Python tokenizer's per-word cache). Symbols are integers (an index for
every vocabulary token and merge symbol), so a pair is one int64 key
`left * num_symbols + right` in a hash table giving its rank. Each loop
step finds, per word, the pair with the lowest rank and merges all its
occurrences left to right, as the Python `bpe`.

Where the two paths could disagree: characters whose Unicode category
differs between this Python's `unicodedata` and the RE2/ICU tables TF was
built with. The dropped characters (category C*) are therefore listed from
`unicodedata` itself: RE2 has no class for unassigned (Cn) characters, and
its newer tables know characters this Python calls unassigned.
"""

import functools
import itertools
import unicodedata

import tensorflow as tf

from keras_bert_impl.gpt.gpt_config import FINE_TUNING_TOKENS
from keras_bert_impl.gpt.gpt_tokenizer import END_OF_WORD
from keras_bert_impl.gpt.gpt_tokenizer import UNK_TOKEN
from keras_bert_impl.gpt.gpt_tokenizer import load_bpe_files
from keras_bert_impl.tokenizers.graph_basic_tokenizer import basic_tokenize
from keras_bert_impl.tokenizers.graph_pairs import keep_first
from keras_bert_impl.tokenizers.graph_pairs import pair_budget
from keras_bert_impl.tokenizers.graph_pairs import trimmed_lengths

# B=batch, W=words in a row, N=words in the batch, U=distinct words,
# S=symbols of all distinct words, P=S - 1 adjacent symbol pairs.
_NO_MERGE = 2**62


@functools.cache
def _category_c_class():
    """An RE2 class of every code point `unicodedata` puts in category C*
    (Cc, Cf, Cn, Co; surrogates cannot occur in UTF-8) but tab, newline and
    carriage return, which are whitespace."""
    categories = map(unicodedata.category, map(chr, range(0x110000)))
    ranges, start = [], 0
    for is_other, group in itertools.groupby(c[0] == "C" for c in categories):
        size = sum(1 for _ in group)
        if is_other:
            ranges.append((start, start + size - 1))
        start += size
    pieces = []
    for low, high in ranges:
        for a, b in ((low, min(high, 0xD7FF)), (max(low, 0xE000), high)):  # not surrogates
            for lo, hi in _without_whitespace(a, b):
                pieces.append(f"\\x{{{lo:X}}}" if lo == hi else f"\\x{{{lo:X}}}-\\x{{{hi:X}}}")
    return "[" + "".join(pieces) + "]"


def _without_whitespace(low, high):
    """`[low, high]` less tab, newline and CR, as sub-ranges (possibly none)."""
    out, start = [], low
    for cp in (0x09, 0x0A, 0x0D):
        if low <= cp <= high:
            if start <= cp - 1:
                out.append((start, cp - 1))
            start = cp + 1
    if start <= high:
        out.append((start, high))
    return out


def gpt_basic_tokenize(strings):
    """`GptBasicTokenizer` in TF ops: `(B,)` strings -> ragged words `(B, W)`.

    BERT's in-graph BasicTokenizer with NFC, after two steps of the
    reference: capital sigma to "σ" (it lowercases character by character,
    so never to the final "ς"), and every category C* character dropped.
    """
    text = tf.convert_to_tensor(strings, tf.string)
    # Invalid UTF-8 bytes are dropped first: RE2 needs valid UTF-8.
    text = tf.strings.unicode_transcode(
        text, "UTF-8", "UTF-8", errors="ignore", replace_control_characters=False
    )
    text = tf.strings.regex_replace(text, "\u03a3", "\u03c3")
    text = tf.strings.regex_replace(text, _category_c_class(), "")
    return basic_tokenize(text, do_lower_case=True, tokenize_chinese_chars=True, normalize_nfc=True)


class GraphGptTokenizer(tf.Module):
    """In-graph GPT BPE tokenizer, the same ids as `GptTokenizer`.

    Args:
        vocab_file: str. `vocab.json`, token -> id.
        merges_file: str. `merges.txt`, "#version" then "left right" lines.

    Call arguments:
        strings: string tensor `(B,)` (or a Python list of str).

    Returns:
        int32 `tf.RaggedTensor` `(B, None)` of token ids.

    Example:
    >>> tokenizer = GraphGptTokenizer("vocab.json", "merges.txt")
    >>> inputs = tokenizer.pack(tokenizer(["Hello world!"]), max_length=16)
    >>> inputs["input_word_ids"].shape
    TensorShape([1, 16])
    """

    def __init__(self, vocab_file, merges_file, name=None):
        super().__init__(name=name)
        vocab, ranks = load_bpe_files(vocab_file, merges_file)
        self.vocab_size = max(vocab.values()) + 1
        self.unk_token_id = vocab[UNK_TOKEN]
        # As `GptTokenizer.add_special_tokens`: after the vocabulary.
        special, next_id = [], self.vocab_size
        for token in FINE_TUNING_TOKENS:
            special.append(vocab.get(token, next_id))
            next_id += token not in vocab
        self.start_token_id, self.delimiter_token_id, self.classify_token_id = special

        # Symbols: every vocabulary token and merge symbol gets an index;
        # one more index stands for characters that are neither.
        names = dict.fromkeys([*vocab, *(s for a, b in ranks for s in (a, b, a + b))])
        symbols = {name: index for index, name in enumerate(names)}
        self._unknown_symbol = len(symbols)
        self._num_symbols = len(symbols) + 1
        self._symbols = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(symbols), tf.string),
                tf.constant(list(symbols.values()), tf.int64),
            ),
            default_value=self._unknown_symbol,
        )
        # symbol_ids[symbol index]: its vocabulary id, or <unk>'s.
        self._symbol_ids = tf.constant(
            [vocab.get(name, self.unk_token_id) for name in symbols] + [self.unk_token_id],
            tf.int64,
        )
        pairs = list(ranks)  # in rank order
        keys = [symbols[a] * self._num_symbols + symbols[b] for a, b in pairs]
        self._merge_ranks = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(keys or [-1], tf.int64),
                tf.constant(list(range(len(pairs))) or [_NO_MERGE], tf.int64),
            ),
            default_value=_NO_MERGE,
        )
        # merged_by_rank[r]: the symbol merge r makes (one spare for no merges).
        self._merged_by_rank = tf.constant([symbols[a + b] for a, b in pairs] + [0], tf.int64)

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize(self, strings):
        """`(B,)` strings -> int32 ragged ids `(B, None)`."""
        words = gpt_basic_tokenize(strings)  # (B, W)
        distinct, index = tf.unique(words.flat_values)  # (U,), (N,)
        ids = tf.gather(self._bpe(distinct), index)  # (N, None)
        ids = tf.RaggedTensor.from_row_splits(ids, words.row_splits)  # (B, W, None)
        return tf.cast(ids.merge_dims(1, 2), tf.int32)  # (B, None)

    def __call__(self, strings):
        return self.tokenize(tf.convert_to_tensor(strings, tf.string))

    def _bpe(self, words):
        """Distinct words `(U,)` -> int64 ragged ids `(U, None)`."""
        chars = tf.strings.unicode_split(words, "UTF-8")  # (U, None)
        row_ids = chars.value_rowids()  # (S,)
        positions = tf.range(tf.size(row_ids, out_type=tf.int64))
        is_last = positions == tf.gather(chars.row_splits[1:] - 1, row_ids)
        symbols = tf.where(
            is_last, tf.strings.join([chars.flat_values, END_OF_WORD]), chars.flat_values
        )
        ids = self._symbols.lookup(symbols)  # (S,)
        num_words = tf.shape(words, out_type=tf.int64)[0]

        def merge_step(ids, row_ids, unused_go):
            return self._merge_step(ids, row_ids, num_words)

        ids, row_ids, _ = tf.while_loop(
            lambda ids, row_ids, go: go,
            merge_step,
            (ids, row_ids, tf.size(ids) > 0),
            shape_invariants=(tf.TensorShape([None]), tf.TensorShape([None]), tf.TensorShape([])),
        )
        ids = tf.gather(self._symbol_ids, ids)  # (S,)
        return tf.RaggedTensor.from_value_rowids(ids, row_ids, nrows=num_words)

    def _merge_step(self, ids, row_ids, num_words):
        """One BPE step on every word: its lowest-rank pair merged wherever
        it occurs, left to right without overlap. `ids`, `row_ids`: `(S,)`
        with S >= 1. Returns the shorter pair and whether anything merged."""
        pair_rows = row_ids[:-1]  # (P,)
        ranks = self._merge_ranks.lookup(ids[:-1] * self._num_symbols + ids[1:])  # (P,)
        ranks = tf.where(pair_rows == row_ids[1:], ranks, _NO_MERGE)  # no pair across words
        best = tf.math.unsorted_segment_min(ranks, pair_rows, num_words)  # (U,)
        match = (ranks == tf.gather(best, pair_rows)) & (ranks < _NO_MERGE)  # (P,)
        # Matches side by side are one pair repeated ("a a a"): left to
        # right, every other one merges, counting from the run's start.
        positions = tf.range(tf.size(match, out_type=tf.int64))  # (P,)
        starts = match & ~tf.concat([[False], match[:-1]], 0)
        run_index = tf.maximum(tf.cumsum(tf.cast(starts, tf.int64)) - 1, 0)
        run_start = tf.gather(tf.concat([tf.boolean_mask(positions, starts), [0]], 0), run_index)
        merge = match & ((positions - run_start) % 2 == 0)  # (P,)
        merged = tf.gather(self._merged_by_rank, tf.where(merge, ranks, 0))  # (P,)
        # Pair p's left symbol becomes the merged one; its right one goes.
        ids = tf.where(tf.concat([merge, [False]], 0), tf.concat([merged, [0]], 0), ids)
        keep = ~tf.concat([[False], merge], 0)  # (S,)
        return tf.boolean_mask(ids, keep), tf.boolean_mask(row_ids, keep), tf.reduce_any(merge)

    def pack(self, ids_a, ids_b=None, max_length=512, special=None):
        """GPT's fine-tuning input, as `GptTokenizer.pack`, padded.

        `_start_ A _classify_` or `_start_ A _delimiter_ B _classify_`;
        pairs are trimmed longest first (ties from B), as BERT's, in closed
        form: B keeps `min(len_b, max(m - len_a, m // 2))` of the budget m.
        `special` (a `gpt_inputs.FineTuningIds`) packs with its three ids
        instead of this tokenizer's, as the fine-tuning entry point does
        (`FineTuningIds.appended_to(vocab_size)`).

        Returns:
            dict of int32 `(B, max_length)` tensors `input_word_ids`
            (padded with 0) and `input_mask`.
        """
        budget = pair_budget(max_length, ids_b is not None)
        keep_a, keep_b = trimmed_lengths(ids_a, ids_b, budget)
        batch = ids_a.nrows()
        start, delimiter, classify = (
            (self.start_token_id, self.delimiter_token_id, self.classify_token_id)
            if special is None else (special.start, special.delimiter, special.classify))

        def column(token_id):
            return tf.RaggedTensor.from_tensor(tf.fill([batch, 1], tf.constant(token_id, tf.int32)))

        pieces = [column(start), keep_first(tf.cast(ids_a, tf.int32), keep_a)]
        if ids_b is not None:
            pieces += [column(delimiter), keep_first(tf.cast(ids_b, tf.int32), keep_b)]
        pieces.append(column(classify))
        ids = tf.concat(pieces, axis=1)  # (B, None)
        shape = tf.stack([batch, max_length])
        return {
            "input_word_ids": ids.to_tensor(0, shape=shape),  # (B, max_length)
            "input_mask": tf.ones_like(ids).to_tensor(0, shape=shape),  # (B, max_length)
        }

"""`GraphXLNetTokenizer`: `XLNetTokenizer`'s ids in the TF graph.

TF string ops and tensorflow-text's `SentencepieceTokenizer` op (the
SentencePiece library itself, with the model's own normalizer), so it runs
inside `tf.data` and a SavedModel.

The preprocessing is the Python path's, step by step: RE2 regular
expressions for the whitespace (the exact set of `str.isspace`) and the
quotes; NFKD with the combining marks dropped, and lowercasing, as lookup
tables from each character to its image under this Python's `unicodedata`
and `str.lower`. Both maps work character by character: NFKD only reorders
combining marks, which are dropped, and lowercasing depends on context only
for a capital sigma, handled by its own rule below. Tables rather than
`tensorflow_text.normalize_utf8` and `tf.strings.lower`, because their ICU
knows other Unicode versions: against Python 3.11 (Unicode 14) they differ
on 118 (NFKD, Unicode 15-16 characters) and 41 (lowercase, Unicode 14
letters) code points.

The digit-comma rule runs on the pieces: the pieces it applies to are
encoded again in one batched op call and spliced in with ragged ops.

Where the two paths could still disagree: SentencePiece versions that break
ties between equally scored segmentations differently (the op's agrees
with the `sentencepiece` package up to 0.2.1; 0.2.2 and later differ on
strings of repeated characters such as "]]]]]"); and a SavedModel keeps
the tables of the Python that exported it, so a Python of another Unicode
version may preprocess newly assigned characters otherwise.
"""

import functools
import itertools
import os
import unicodedata

import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_impl.tokenizers.graph_pairs import keep_first
from keras_bert_impl.tokenizers.graph_pairs import pair_budget
from keras_bert_impl.tokenizers.graph_pairs import trimmed_lengths
from keras_bert_impl.xlnet.xlnet_tokenizer import SEG_ID_A
from keras_bert_impl.xlnet.xlnet_tokenizer import SEG_ID_B
from keras_bert_impl.xlnet.xlnet_tokenizer import SEG_ID_CLS
from keras_bert_impl.xlnet.xlnet_tokenizer import SEG_ID_PAD
from keras_bert_impl.xlnet.xlnet_tokenizer import SPIECE_UNDERLINE
from keras_bert_impl.xlnet.xlnet_tokenizer import XLNetTokenizer

# B=batch, C=characters of the batch, K=those not case-ignorable, P=pieces
# of the batch, M=pieces the digit-comma rule re-encodes, Q=their new
# pieces, L=max_length.
_UNCHANGED = b"\xff"  # never valid UTF-8, so never a table's value
_SIGMA = "\u03a3"


def _code_points():
    """Every code point that can have a case, a decomposition or a digit or
    whitespace property: planes 0-3 and 14 less the surrogates. Planes 4-13
    are unassigned and 15-16 private use (none of those) in every Unicode
    version to date (16.0)."""
    planes = itertools.chain(range(0x40000), range(0xE0000, 0xF0000))
    return (c for c in planes if not 0xD800 <= c <= 0xDFFF)


def _re2_class(code_points):
    """An RE2 character class of the sorted code points, as ranges."""
    pieces = []
    for _, run in itertools.groupby(enumerate(code_points), lambda p: p[1] - p[0]):
        run = [c for _, c in run]
        low, high = run[0], run[-1]
        pieces.append(f"\\x{{{low:X}}}" if low == high else f"\\x{{{low:X}}}-\\x{{{high:X}}}")
    return "[" + "".join(pieces) + "]"


@functools.cache
def _whitespace_class():
    """What `str.split()` splits on, as an RE2 class."""
    return _re2_class([c for c in _code_points() if chr(c).isspace()])


@functools.cache
def _digit_class():
    """`str.isdigit` characters (decimal digits, superscripts, circled...)."""
    return _re2_class([c for c in _code_points() if chr(c).isdigit()])


def _per_character(function):
    """`function` of every character alone, in one call on all of them:
    NUL between characters blocks NFKD's reordering of combining marks and
    stands in no casing context (not cased, not case-ignorable)."""
    chars = [chr(c) for c in _code_points() if c]
    return chars, function("\0".join(chars)).split("\0")


@functools.cache
def _lower_map():
    """Character -> `str.lower` of it alone, where they differ."""
    chars, lowered = _per_character(str.lower)
    return {c: lower for c, lower in zip(chars, lowered) if lower != c}


@functools.cache
def _strip_accents_map():
    """Character -> its NFKD without combining marks, where they differ."""
    chars, decomposed = _per_character(functools.partial(unicodedata.normalize, "NFKD"))
    out = {}
    for c, nfkd in zip(chars, decomposed):
        if nfkd != c or unicodedata.combining(c):
            folded = "".join(x for x in nfkd if not unicodedata.combining(x))
            if folded != c:
                out[c] = folded
    return out


@functools.cache
def _sigma_context_sets():
    """`(cased, case_ignorable)` as this Python's `str.lower` sees them
    for the Final_Sigma rule, read off its own behaviour: after a cased
    character x (and case-ignorable ones skipped) "xΣ" ends in "ς"; after a
    case-ignorable x it does only when a cased character precedes x."""
    chars = [chr(c) for c in _code_points() if c]
    after_x = "\0".join(c + _SIGMA for c in chars).lower().split("\0")
    after_ax = "\0".join("A" + c + _SIGMA for c in chars).lower().split("\0")
    cased = [c for c, text in zip(chars, after_x) if text[-1] == "\u03c2"]
    ignorable = [c for c, x, ax in zip(chars, after_x, after_ax)
                 if x[-1] != "\u03c2" and ax[-1] == "\u03c2"]
    return cased, ignorable


def _string_table(mapping):
    keys = tf.constant(list(mapping) or [""], tf.string)
    values = tf.constant(list(mapping.values()) or [_UNCHANGED], tf.string)
    return tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(keys, values), default_value=_UNCHANGED)


def _set_table(members):
    return tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(members, tf.string), tf.ones([len(members)], tf.int32)),
        default_value=0)


def _map_chars(text, table):
    """Each character of `(B,)` strings replaced by its value in `table`."""
    chars = tf.strings.unicode_split(text, "UTF-8")  # (B, C)
    mapped = table.lookup(chars.flat_values)  # (C,)
    mapped = tf.where(mapped == _UNCHANGED, chars.flat_values, mapped)
    return tf.strings.reduce_join(chars.with_flat_values(mapped), axis=1)  # (B,)


class GraphXLNetTokenizer(tf.Module):
    """In-graph XLNet tokenizer, the same ids as `XLNetTokenizer`.

    Args:
        model_file: str. A SentencePiece model (`spiece.model`).
        do_lower_case: bool. True for uncased models.
        remove_space: bool. Collapse whitespace runs to one space.
        keep_accents: bool. Skip NFKD and the removal of combining marks.

    Call arguments:
        strings: string tensor `(B,)` (or a Python list of str).

    Returns:
        int32 `tf.RaggedTensor` `(B, None)` of piece ids.

    Example:
    >>> tokenizer = GraphXLNetTokenizer("spiece.model")
    >>> inputs = tokenizer.pack(tokenizer(["Hello world!"]), max_length=16)
    >>> inputs["input_word_ids"].shape
    TensorShape([1, 16])
    """

    def __init__(self, model_file, do_lower_case=False, remove_space=True, keep_accents=False,
                 name=None):
        super().__init__(name=name)
        python = XLNetTokenizer(model_file, do_lower_case, remove_space, keep_accents)
        self.do_lower_case = do_lower_case
        self.remove_space = remove_space
        self.keep_accents = keep_accents
        self.vocab_size = python.vocab_size
        for attribute in ("unk_id", "bos_id", "eos_id", "cls_id", "sep_id", "pad_id", "mask_id",
                          "eod_id", "eop_id"):
            setattr(self, attribute, getattr(python, attribute))
        with open(os.fspath(model_file), "rb") as f:
            self._model = f.read()
        self._digit_comma = f"(?s).*{_digit_class()},"
        if do_lower_case:
            self._lower = _string_table(_lower_map())
        if not keep_accents:
            self._strip_accents = _string_table(_strip_accents_map())
        if do_lower_case and not keep_accents:
            cased, ignorable = _sigma_context_sets()
            self._cased = _set_table(cased)
            self._case_ignorable = _set_table(ignorable)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def preprocess(self, strings):
        """`preprocess_text` in TF ops: `(B,)` strings -> `(B,)` strings."""
        # Invalid UTF-8 becomes U+FFFD first, as the Python path decodes bytes.
        text = tf.strings.unicode_transcode(
            strings, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD,
            replace_control_characters=False)
        if self.do_lower_case:
            text = _map_chars(text, self._lower)
        if self.remove_space:
            text = tf.strings.regex_replace(text, _whitespace_class() + "+", " ")
            text = tf.strings.regex_replace(text, "^ | $", "")
        text = tf.strings.regex_replace(text, "``", '"')
        text = tf.strings.regex_replace(text, "''", '"')
        if not self.keep_accents:
            text = _map_chars(text, self._strip_accents)
        if self.do_lower_case:
            if not self.keep_accents:  # only NFKD can bring a capital sigma back
                has_sigma = tf.reduce_any(tf.strings.regex_full_match(text, f"(?s).*{_SIGMA}.*"))
                text = tf.cond(has_sigma, lambda: self._final_sigma(text), lambda: text)
            text = _map_chars(text, self._lower)
        return text

    def _final_sigma(self, text):
        """Capital sigmas in Final_Sigma context -> "ς" (the rest are left
        to the lowercase table, which maps them to "σ"): after a cased
        character and not before one, case-ignorable ones skipped."""
        chars = tf.strings.unicode_split(text, "UTF-8")  # (B, C)
        values = chars.flat_values  # (C,)
        rows = chars.value_rowids()  # (C,)
        anchor = self._case_ignorable.lookup(values) == 0  # (C,) not case-ignorable
        cased = self._cased.lookup(values) == 1  # (C,)
        anchors = tf.where(anchor)[:, 0]  # (K,) positions of the anchors
        num_anchors = tf.size(anchors, out_type=tf.int64)
        padded = tf.concat([anchors, [0]], 0)  # (K + 1,) so every gather is in range
        before = tf.cumsum(tf.cast(anchor, tf.int64), exclusive=True)  # (C,) anchors before
        previous = tf.gather(padded, tf.maximum(before - 1, 0))  # (C,)
        after = before + tf.cast(anchor, tf.int64)  # (C,) anchors up to here
        following = tf.gather(padded, after)  # (C,)
        cased_before = (before > 0) & (tf.gather(rows, previous) == rows)
        cased_before &= tf.gather(cased, previous)
        cased_after = (after < num_anchors) & (tf.gather(rows, following) == rows)
        cased_after &= tf.gather(cased, following)
        final = (values == _SIGMA) & cased_before & ~cased_after
        values = tf.where(final, "\u03c2", values)
        return tf.strings.reduce_join(chars.with_flat_values(values), axis=1)  # (B,)

    def _sentencepiece(self):
        """The SentencePiece op, made in each traced function that uses it.

        Its resource is owned by the op's kernel: one made eagerly would
        die with the eager kernel cache (`keras.backend.clear_session()`
        clears it); made inside the function, it lives as the function
        does, and a SavedModel holds the model bytes in the graph.
        """
        return tf_text.SentencepieceTokenizer(model=self._model, out_type=tf.string)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def tokenize_to_pieces(self, strings):
        """`(B,)` strings -> ragged pieces `(B, None)`, as `XLNetTokenizer.tokenize`."""
        return self._pieces(self._sentencepiece(), strings)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def tokenize(self, strings):
        """`(B,)` strings -> int32 ragged ids `(B, None)`."""
        sentencepiece = self._sentencepiece()
        pieces = self._pieces(sentencepiece, strings)
        return tf.cast(sentencepiece.string_to_id(pieces), tf.int32)

    def _pieces(self, sentencepiece, strings):
        pieces = sentencepiece.tokenize(self.preprocess(strings))  # (B, P)
        return self._fix_digit_comma(sentencepiece, pieces)

    def __call__(self, strings):
        return self.tokenize(tf.convert_to_tensor(strings, tf.string))

    def _fix_digit_comma(self, sentencepiece, pieces):
        """`fix_digit_comma` on ragged pieces `(B, P)`."""
        flat = pieces.flat_values  # (P,)
        hit = tf.strings.regex_full_match(flat, self._digit_comma)  # (P,)
        hits = tf.boolean_mask(flat, hit)  # (M,)
        text = tf.strings.regex_replace(tf.strings.regex_replace(hits, ",$", ""),
                                        SPIECE_UNDERLINE, "")
        new = sentencepiece.tokenize(text)  # (M, Q)
        # A piece that did not start a word: its first new piece loses "▁".
        first = new.row_splits[:-1]  # (M,)
        has_first = new.row_lengths() > 0
        first_piece = tf.gather(tf.concat([new.flat_values, [""]], 0), first)  # (M,)
        strip = ~tf.strings.regex_full_match(hits, f"(?s){SPIECE_UNDERLINE}.*") & has_first
        strip &= tf.strings.regex_full_match(first_piece, f"(?s){SPIECE_UNDERLINE}.*")
        stripped = tf.strings.regex_replace(first_piece, f"^{SPIECE_UNDERLINE}", "")
        first_at = tf.boolean_mask(first, strip)[:, None]
        values = tf.tensor_scatter_nd_update(
            new.flat_values, first_at, tf.boolean_mask(stripped, strip))  # (Q,)
        keep = tf.tensor_scatter_nd_update(  # a lone "▁" goes
            tf.ones_like(values, tf.bool), first_at, tf.boolean_mask(stripped, strip) != "")
        new = tf.ragged.boolean_mask(new.with_flat_values(values), new.with_flat_values(keep))
        comma = tf.RaggedTensor.from_tensor(tf.fill([tf.shape(hits)[0], 1], ","))
        new = tf.concat([new, comma], axis=1)  # (M, Q')
        # Splice: piece p becomes itself, or its new pieces, in a pool of both.
        num_pieces = tf.size(flat, out_type=tf.int64)
        positions = tf.range(num_pieces)  # (P,)
        hit_rank = tf.maximum(tf.cumsum(tf.cast(hit, tf.int64)) - 1, 0)  # (P,)
        starts = tf.where(hit, num_pieces + tf.gather(new.row_splits, hit_rank), positions)
        new_lengths = tf.concat([new.row_lengths(), [0]], 0)  # (M + 1,): in range when M = 0
        lengths = tf.where(hit, tf.gather(new_lengths, hit_rank), tf.ones_like(positions))  # (P,)
        index = tf.ragged.range(starts, starts + lengths).flat_values
        values = tf.gather(tf.concat([flat, new.flat_values], 0), index)
        row_lengths = tf.math.unsorted_segment_sum(lengths, pieces.value_rowids(), pieces.nrows())
        return tf.RaggedTensor.from_row_lengths(values, row_lengths)  # (B, None)

    def pack(self, ids_a, ids_b=None, max_length=512):
        """XLNet's fine-tuning input, as `XLNetTokenizer.__call__`, left-padded.

        `A <sep> <cls>` or `A <sep> B <sep> <cls>`; A alone is cut to
        `max_length - 2`, a pair trimmed longest first (ties from B) in
        closed form: B keeps `min(len_b, max(m - len_a, m // 2))` of the
        budget m.

        Returns:
            dict of int32 `(B, L)` tensors `input_word_ids` (padded with
            `pad_id` on the left), `input_type_ids` (A=0, B=1, <cls>=2,
            padding 4) and `input_mask` (1 on padding).
        """
        budget = pair_budget(max_length, ids_b is not None)
        keep_a, keep_b = trimmed_lengths(ids_a, ids_b, budget)
        batch = ids_a.nrows()

        def column(value):
            return tf.RaggedTensor.from_tensor(tf.fill([batch, 1], tf.constant(value, tf.int32)))

        def segment(ids, keep, segment_id):
            ids = keep_first(tf.cast(ids, tf.int32), keep)
            return [ids, column(self.sep_id)], [
                tf.ones_like(ids) * segment_id, column(segment_id)]

        ids, types = segment(ids_a, keep_a, SEG_ID_A)
        if ids_b is not None:
            more_ids, more_types = segment(ids_b, keep_b, SEG_ID_B)
            ids, types = ids + more_ids, types + more_types
        ids = tf.concat([*ids, column(self.cls_id)], axis=1)  # (B, None)
        types = tf.concat([*types, column(SEG_ID_CLS)], axis=1)  # (B, None)
        # Left padding: position j of a row of n ids holds id j - (L - n).
        source = tf.range(max_length, dtype=tf.int64)[None, :] - (
            max_length - ids.row_lengths()[:, None])  # (B, L)
        real = source >= 0  # (B, L)
        shape = tf.stack([batch, max_length])
        source = tf.maximum(source, 0)

        def left_pad(ragged, value):
            dense = ragged.to_tensor(value, shape=shape)  # (B, L)
            return tf.where(real, tf.gather(dense, source, batch_dims=1), value)

        return {
            "input_word_ids": left_pad(ids, self.pad_id),
            "input_type_ids": left_pad(types, SEG_ID_PAD),
            "input_mask": tf.cast(~real, tf.int32),
        }

"""`GraphBertTokenizer`: the same tokenization as `BertTokenizer`, in the TF graph.

Built from core TF string ops (RE2 regular expressions with Unicode classes,
ICU lowercasing) and tensorflow-text (NFD normalization, regex splitting,
WordPiece), so it runs inside `tf.data` and an exported SavedModel.
tensorflow-text's own `BertTokenizer` is not used: its lowercasing is ICU
NFKC case folding (full-width forms, ligatures and "ß" change; zero-width
characters vanish) and its word limit counts bytes, not characters, so its
ids differ from the original's on such text.

Where the two paths can still disagree: characters whose Unicode category
differs between Python's `unicodedata` and the RE2/ICU tables TensorFlow
was built with (characters assigned in recent Unicode versions). The
corpus test shows none on 2,053 varied strings.

Fast path. On printable ASCII (plus tab, newline, CR, the no-break space
and common typographic punctuation: `FAST_PATH_PUNCTUATION`) the original's
rules reduce to: lowercase A-Z (uncased), split on whitespace and
punctuation, WordPiece each word, a word over `max_input_chars_per_word`
characters becomes [UNK]. That is what tensorflow-text's end-to-end
`FastWordpieceTokenizer` (the WordPiece half of `FastBertTokenizer`) does,
so such strings skip the cleanup regexes, ICU lowercasing and NFD; all
other strings take the exact path above and the rows are merged back in
order. Where the end-to-end mode differs from the original, and how it is
kept out: vocabulary tokens with whitespace inside (e.g. the placeholder
for a duplicated line) let its trie match across spaces, so every token
that fast-path text cannot produce is renamed to a never-matching name;
its word limit counts bytes, equal to characters on the ASCII words (the
only words there that are not one punctuation character); it splits on
ASCII controls the original drops, so those take the exact path. Its own
normalizer is not needed: ASCII lowering is the whole of it on this text.
The tests check the fast path against the Python path on the corpus, on
random text and on every character it accepts.
"""

import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_impl.bert.wordpiece import load_vocab
from keras_bert_impl.tokenizers.basic_tokenizer import is_punctuation
from keras_bert_impl.tokenizers.graph_basic_tokenizer import basic_tokenize
from keras_bert_impl.tokenizers.graph_pairs import keep_first
from keras_bert_impl.tokenizers.graph_pairs import trimmed_lengths

_LONG_WORD_PLACEHOLDER = "[UNK]"
# Strings the fast path takes: printable ASCII, tab, newline, CR (other
# ASCII controls are dropped by the original but split on by
# tensorflow-text), the no-break space (whitespace in both), and common
# typographic punctuation: dashes, curly quotes, ellipsis, guillemets...
# (Unicode P*, unchanged by lowercasing and NFD, a word of its own in both).
FAST_PATH_PUNCTUATION = "\u00a1\u00a7\u00ab\u00b6\u00b7\u00bb\u00bf" + "".join(
    chr(c) for c in range(0x2010, 0x2028)
)
_FAST_PATH_ASCII = r"[\t\n\r -~]*"
_FAST_PATH_TEXT = r"[\t\n\r -~\x{A0}\x{A1}\x{A7}\x{AB}\x{B6}\x{B7}\x{BB}\x{BF}\x{2010}-\x{2027}]*"


class GraphBertTokenizer(tf.Module):
    """In-graph BasicTokenizer + WordPiece with the original's rules.

    Args:
        vocab_file: str. `vocab.txt`.
        do_lower_case: bool. True for uncased checkpoints.
        max_input_chars_per_word: int. Longer words become [UNK].
        tokenize_chinese_chars: bool. Spaces around CJK ideographs.
        normalize_nfc: bool. Hugging Face's extra NFC step; off, as the
            original.

    Call arguments:
        strings: string tensor `(B,)` (or a Python list of str).

    Returns:
        int32 `tf.RaggedTensor` `(B, None)` of token ids.
    """

    def __init__(
        self,
        vocab_file,
        do_lower_case=True,
        max_input_chars_per_word=200,
        tokenize_chinese_chars=True,
        normalize_nfc=False,
        name=None,
    ):
        super().__init__(name=name)
        vocab = load_vocab(vocab_file)
        self.normalize_nfc = normalize_nfc
        self.do_lower_case = do_lower_case
        self.max_input_chars_per_word = max_input_chars_per_word
        self.tokenize_chinese_chars = tokenize_chinese_chars
        # FastWordpieceTokenizer (LinMaxMatch) gives the same pieces as the
        # original greedy longest-match-first, ~8x faster than
        # tf_text.WordpieceTokenizer (measured); the corpus test checks ids.
        # Lines whose token is listed again later keep a never-matching name.
        tokens = [f"[duplicate line {i}]" for i in range(max(vocab.values()) + 1)]
        for token, index in vocab.items():
            tokens[index] = token
        self.wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=tokens,
            suffix_indicator="##",
            # The character limit is applied before, per word; this only
            # guards WordPiece's own byte-based limit.
            max_bytes_per_word=4 * max_input_chars_per_word + 4,
            token_out_type=tf.int64,
            unknown_token="[UNK]",
            no_pretokenization=True,
            support_detokenization=False,
        )
        for token in ("pad", "unk", "cls", "sep", "mask"):
            setattr(self, f"{token}_token_id", vocab[f"[{token.upper()}]"])
        fast_tokens = _fast_path_tokens(tokens)
        # End to end: its own whitespace and punctuation split, which on
        # fast-path text is the original's (see the module docstring).
        self.fast_wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=fast_tokens,
            suffix_indicator="##",
            max_bytes_per_word=max_input_chars_per_word,  # ASCII: bytes == characters
            token_out_type=tf.int32,
            unknown_token=fast_tokens[self.unk_token_id],
            no_pretokenization=False,
            support_detokenization=False,
        )

    def fast_path_rows(self, strings):
        """`(B,)` bool: which strings the fast path tokenizes."""
        # Punctuation of 2-3 bytes is a word over a byte limit under 3.
        pattern = _FAST_PATH_TEXT if self.max_input_chars_per_word >= 3 else _FAST_PATH_ASCII
        return tf.strings.regex_full_match(strings, pattern)

    def words(self, strings):
        """BasicTokenizer in the graph, words over the limit as "[UNK]"."""
        words = basic_tokenize(
            strings, self.do_lower_case, self.tokenize_chinese_chars, self.normalize_nfc
        )
        # The original's character (not byte) limit: too-long words -> [UNK].
        # On the flat values: ragged dispatch of tf.where costs more than the
        # whole WordPiece step.
        flat = words.flat_values
        too_long = tf.strings.length(flat, unit="UTF8_CHAR") > self.max_input_chars_per_word
        return words.with_flat_values(tf.where(too_long, _LONG_WORD_PLACEHOLDER, flat))

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize(self, strings):
        """`(B,)` strings -> int32 ragged ids `(B, None)`."""
        fast = self.fast_path_rows(strings)
        # All rows fast (most English batches): no partition, no copies.
        return tf.cond(
            tf.reduce_all(fast),
            lambda: self._fast_ids(strings),
            lambda: self._mixed_ids(strings, fast),
        )

    def _fast_ids(self, strings):
        """Fast-path strings `(B,)` -> int32 ragged ids `(B, None)`."""
        if self.do_lower_case:
            strings = tf.strings.lower(strings)  # ASCII-only: the rest has no case
        return self.fast_wordpiece.tokenize(strings)

    def _exact_ids(self, strings):
        """Any `(B,)` -> int32 ragged ids `(B, None)`, the full rules."""
        ids = self.wordpiece.tokenize(self.words(strings))  # (B, words, pieces)
        return tf.cast(ids.merge_dims(-2, -1), tf.int32)

    def _mixed_ids(self, strings, fast):
        """Fast rows and the rest tokenized apart, then put back in order."""
        fast_rows = tf.where(fast)[:, 0]
        exact_rows = tf.where(tf.logical_not(fast))[:, 0]
        ids = tf.concat(
            [
                self._fast_ids(tf.gather(strings, fast_rows)),
                self._exact_ids(tf.gather(strings, exact_rows)),
            ],
            axis=0,
        )
        order = tf.math.invert_permutation(tf.concat([fast_rows, exact_rows], axis=0))
        return tf.gather(ids, order)

    def __call__(self, strings):
        return self.tokenize(tf.convert_to_tensor(strings, tf.string))

    def pack(self, ids_a, ids_b=None, max_length=128):
        """`[CLS] A [SEP] (B [SEP])` padded to `max_length`, as `BertTokenizer`.

        Truncation is the original `_truncate_seq_pair` (longest first, ties
        trimmed from B) in closed form: B keeps `min(len_b, max(m - len_a,
        m // 2))` tokens and A the rest of the budget `m`.

        Returns:
            dict of int32 `(B, max_length)` tensors `input_word_ids`,
            `input_mask`, `input_type_ids`.
        """
        segments = [ids_a] if ids_b is None else [ids_a, ids_b]
        budget = max_length - len(segments) - 1
        keep_a, keep_b = trimmed_lengths(ids_a, ids_b, budget)
        segments = [keep_first(ids, keep) for ids, keep in zip(segments, (keep_a, keep_b))]
        ids, type_ids = tf_text.combine_segments(
            segments, start_of_sequence_id=self.cls_token_id, end_of_segment_id=self.sep_token_id
        )
        word_ids, mask = tf_text.pad_model_inputs(ids, max_length, pad_value=self.pad_token_id)
        type_ids, _ = tf_text.pad_model_inputs(type_ids, max_length, pad_value=0)
        return {
            "input_word_ids": tf.cast(word_ids, tf.int32),
            "input_mask": tf.cast(mask, tf.int32),
            "input_type_ids": tf.cast(type_ids, tf.int32),
        }


def _fast_path_tokens(tokens):
    """`tokens` with every entry that fast-path text cannot produce (a gap,
    whitespace, other non-ASCII, punctuation inside a longer token, "##"
    alone) renamed U+E000 + its line number: unique, never matched there."""
    kept = []
    for index, token in enumerate(tokens):
        body = token[2:] if token.startswith("##") and len(token) > 2 else token
        one_char = len(body) == 1
        if one_char and (body in FAST_PATH_PUNCTUATION or (body.isascii() and is_punctuation(body))):
            reachable = body == token  # "," is a word; "##," never follows one
        else:
            reachable = body.isascii() and body.isalnum()  # ASCII letters and digits
        kept.append(token if reachable else f"\ue000{index}")
    return kept

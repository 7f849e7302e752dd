"""The original BasicTokenizer in TensorFlow ops (`basic_tokenize`), shared by
every family's in-graph tokenizer; `BasicTokenizer` is the Python one."""

import tensorflow as tf
import tensorflow_text as tf_text

# Characters the original's `_clean_text` turns into spaces (tab, newline,
# CR and category Zs but the plain space, listed so that the very common
# space itself is not rewritten), plus U+2028/U+2029, which it keeps but its
# `str.split()` splits on. Then the characters it drops.
_WHITESPACE = (
    r"[\t\n\r\x{2028}\x{2029}\x{A0}\x{1680}\x{2000}-\x{200A}\x{202F}\x{205F}\x{3000}]"
)


_DROPPED = r"[\x{0}\x{FFFD}\p{Cc}\p{Cf}]"


# The original's `_is_chinese_char` ranges.
_CJK = (
    r"([\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B73F}"
    r"\x{2B740}-\x{2B81F}\x{2B820}-\x{2CEAF}\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F}])"
)


# The original's `_is_punctuation`: ASCII symbol ranges and Unicode P*.
_PUNCTUATION = r"([!-/:-@\[-`{-~\p{P}])"


def basic_tokenize(strings, do_lower_case=True, tokenize_chinese_chars=True, normalize_nfc=False):
    """The original BasicTokenizer in TF ops: `(B,)` strings -> ragged words.

    `normalize_nfc=True` adds the NFC step of Hugging Face's port, as
    `BasicTokenizer(normalize_nfc=True)` does in Python.
    """
    text = tf.convert_to_tensor(strings, tf.string)
    # Invalid UTF-8 bytes are dropped, as the original's decode("ignore").
    text = tf.strings.unicode_transcode(
        text, "UTF-8", "UTF-8", errors="ignore", replace_control_characters=False
    )
    text = tf.strings.regex_replace(text, _WHITESPACE, " ")
    text = tf.strings.regex_replace(text, _DROPPED, "")
    if tokenize_chinese_chars:
        text = tf.strings.regex_replace(text, _CJK, r" \1 ")
    if normalize_nfc:
        text = tf_text.normalize_utf8(text, "NFC")
    if do_lower_case:
        text = tf.strings.lower(text, encoding="utf-8")
        text = tf_text.normalize_utf8(text, "NFD")
        text = tf.strings.regex_replace(text, r"\p{Mn}", "")
    # Punctuation becomes a word of its own; then split on spaces (the only
    # whitespace left). Two passes of simple ops: ~3.5x faster than one
    # `tf_text.regex_split` with the same rules (measured).
    text = tf.strings.regex_replace(text, _PUNCTUATION, r" \1 ")
    return tf.strings.split(text)

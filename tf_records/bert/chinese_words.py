"""Chinese whole-word masking: which tokens continue a segmented word.

BERT's BasicTokenizer makes every CJK ideograph a token of its own, so on
Chinese text the "##" rule of whole-word masking sees one-character words
and masks exactly as without it. Chinese-BERT-wwm (Cui et al. 2019)
segments the text into words (with LTP; jieba here) and masks all the
characters of a chosen word together, while the inputs keep BERT's
character tokens. As in Hugging Face's `run_chinese_ref.py` (what its
`DataCollatorForWholeWordMask` reads): a segmented word of two or more
characters, all CJK ideographs, marks its characters after the first as
continuing the word; nothing else is marked, so the words of other scripts
in mixed text keep the "##" rule. The marks come from the raw line (the
segmenter needs the sentence) and go to the tokens of those characters;
the ids are the plain tokenizer's, byte for byte.

A marked token travels from tokenization to masking as `id + vocab_size`
(`mark_line`). Instance creation only joins, cuts and counts token lists,
so the mark stays on its token through it with no parallel list to keep
in step, and the path without a segmenter runs exactly as before;
`split_marks` turns marked ids back into ids and flags before anything
reads a token's value.

jieba is optional (`pip install keras_bert_impl[chinese]`) and imported
only when a segmenter is asked for.
"""

import importlib.metadata
import importlib.util
import logging
import warnings

import numpy as np

SEGMENTERS = ("jieba",)
INSTALL_HINT = "pip install keras_bert_impl[chinese] (or: pip install jieba)"

_SEGMENTERS = {}  # name -> loaded segmenter, once per process
_CJK_SEEN = {}  # character -> whether it is a CJK ideograph


def check_segmenter(name):
    """Raises `ImportError` saying how to install segmenter `name` unless it
    can be imported; `ValueError` for a name not in `SEGMENTERS`. Loads no
    dictionary (cheap: called before any output is written)."""
    if name not in SEGMENTERS:
        raise ValueError(f"Unknown Chinese word segmenter {name!r}; known: "
                         f"{', '.join(SEGMENTERS)}.")
    if importlib.util.find_spec(name) is None:
        raise ImportError(f"The Chinese word segmenter {name!r} is not installed: "
                          f"{INSTALL_HINT}.")


def segmenter_version(name):
    """The installed version of segmenter `name` (its dictionary decides the
    words, so the manifest records it)."""
    check_segmenter(name)
    return importlib.metadata.version(name)


def load_segmenter(name):
    """A function `line -> list of words` whose concatenation is the line.

    jieba: its default dictionary and settings (precise mode, HMM for
    unknown words), in a private `jieba.Tokenizer`: words a caller adds to
    jieba's global tokenizer do not change the records.
    """
    if name in _SEGMENTERS:
        return _SEGMENTERS[name]
    check_segmenter(name)
    with warnings.catch_warnings():
        # jieba 0.42 imports the deprecated pkg_resources: a UserWarning at
        # every worker start that says nothing about the data.
        warnings.simplefilter("ignore", UserWarning)
        import jieba  # lazy: optional dependency, pip install keras_bert_impl[chinese]
    # Its dictionary-loading lines on stderr would interleave with the
    # writer's progress, once per worker.
    jieba.setLogLevel(logging.WARNING)
    tokenizer = jieba.Tokenizer()
    tokenizer.initialize()
    _SEGMENTERS[name] = tokenizer.lcut
    return tokenizer.lcut


def cjk_continuations(line, words):
    """For each CJK ideograph of `line` (BERT's `_is_chinese_char` ranges),
    in order: whether it continues a Chinese word, i.e. is not the first
    character of a segmented word of 2+ characters that are all CJK.
    `words`: the line's segmentation, in order, covering it exactly."""
    if "".join(words) != line:  # the marks would land on the wrong characters
        raise ValueError(f"The word segmentation does not cover the line {line[:80]!r} exactly "
                         f"(words: {words[:10]!r}...).")
    flags = []
    for word in words:
        cjk = [_is_cjk(char) for char in word]
        if len(word) > 1 and all(cjk):
            flags += [False] + [True] * (len(word) - 1)
        else:  # a one-character word, or one with other characters ("T恤"): no continuation
            flags += [False] * sum(cjk)
    return flags


def mark_line(tokenizer, line, segment, vocab_size):
    """The ids of `line` (those `tokenizer.tokenize` gives), each token that
    continues a segmented Chinese word as `id + vocab_size`.

    BasicTokenizer makes each CJK ideograph a word of its own, in order,
    and WordPiece keeps a one-character word as one piece (itself, or
    [UNK]); so the one-ideograph words of the line are its ideographs, one
    to one, and take their marks from `cjk_continuations` in turn. The
    pieces are the tokenizer's own (`tokenize` is the same per-word split
    with a cache).
    """
    if not tokenizer.basic_tokenizer.tokenize_chinese_chars:
        raise ValueError("Chinese words need the tokenizer's tokenize_chinese_chars=True: "
                         "a character per token.")
    continues = cjk_continuations(line, segment(line))
    tokens, marks = [], []
    wordpiece = tokenizer.wordpiece_tokenizer
    next_cjk = 0
    for word in tokenizer.basic_tokenizer.tokenize(line):
        if len(word) == 1 and _is_cjk(word):
            tokens.append(word)  # not in the vocabulary: [UNK], as WordPiece makes it
            marks.append(continues[next_cjk])
            next_cjk += 1
        else:
            pieces = [piece for piece, _ in wordpiece.tokenize_word(word)]
            tokens += pieces
            marks += [False] * len(pieces)
    if next_cjk != len(continues):  # not seen; the marks would be misplaced
        raise ValueError(f"Line {line[:80]!r}: {len(continues)} CJK characters but {next_cjk} "
                         "one-character tokens of them.")
    ids = tokenizer.convert_tokens_to_ids(tokens)
    return [i + vocab_size if mark else i for i, mark in zip(ids, marks)]


def _is_cjk(char):
    """BERT's `_is_chinese_char`, worked out once per distinct character
    (it tests eight code-point ranges; this runs for every character)."""
    found = _CJK_SEEN.get(char)
    if found is None:
        # A module, not the package: a worker imports this file before
        # `writer._tensorflow_free_worker` lets it import keras_bert_impl's modules.
        # lazy: the writer's worker processes import no TensorFlow
        from keras_bert_impl.tokenizers.basic_tokenizer import is_cjk

        found = _CJK_SEEN[char] = is_cjk(char)
    return found


def split_marks(ids, vocab_size):
    """Marked ids (`mark_line`) -> `(ids, continues)`: numpy arrays of the
    same shape, `continues` bool; a list gives two lists."""
    if isinstance(ids, list):
        return ([i - vocab_size if i >= vocab_size else i for i in ids],
                [i >= vocab_size for i in ids])
    continues = ids >= vocab_size
    return np.where(continues, ids - vocab_size, ids).astype(ids.dtype), continues

"""`XLNetTokenizer`: text to XLNet's SentencePiece ids, in plain Python.

XLNet (Yang et al. 2019) reads text as the pieces of a SentencePiece
unigram model (Kudo 2018; Kudo and Richardson 2018), after its own
preprocessing (`prepro_utils.preprocess_text`): runs of whitespace become
one space, `` and '' become ", NFKD with the combining marks dropped (unless
`keep_accents`), optional lowercasing. One rule runs after the model
(`prepro_utils.encode_pieces`): a piece ending in a digit and a comma
("▁1," or "000,") is encoded again without the comma, so numbers split the
same whether a comma follows them or not, and the comma becomes a piece of
its own.

This is that path, id for id: transformers 4's sentencepiece-based
`XLNetTokenizer` (the goldens test checks 2,000+ strings). As there, with
`do_lower_case` the text is first lowercased character by character (a
capital sigma always becomes "σ", never the final "ς") before the original
preprocessing lowercases it again. Text is never read as control symbols:
"<cls>" typed in text is split like any text; "<eop>", a user-defined
symbol of XLNet's model, is matched by SentencePiece itself.
"""

import os
import unicodedata

import numpy as np
import sentencepiece

from keras_bert_impl.tokenizers.pairs import truncate_seq_pair

SPIECE_UNDERLINE = "\u2581"  # "▁", SentencePiece's word-start mark
# XLNet's special symbols at the ids of its released model (`data_utils.py`).
SPECIAL_SYMBOLS = {
    "unk": "<unk>",
    "bos": "<s>",
    "eos": "</s>",
    "cls": "<cls>",
    "sep": "<sep>",
    "pad": "<pad>",
    "mask": "<mask>",
    "eod": "<eod>",
    "eop": "<eop>",
}
XLNET_SPECIAL_IDS = {
    "<unk>": 0, "<s>": 1, "</s>": 2, "<cls>": 3, "<sep>": 4,
    "<pad>": 5, "<mask>": 6, "<eod>": 7, "<eop>": 8,
}
# Segment ids of XLNet's fine-tuning inputs (`classifier_utils.py`).
SEG_ID_A = 0
SEG_ID_B = 1
SEG_ID_CLS = 2
SEG_ID_SEP = 3
SEG_ID_PAD = 4
# `data_utils._is_start_piece`: single punctuation pieces that start a word
# (no "'", "<", "=" or ">": the original list lacks them).
START_PUNCTUATION = frozenset('!"#$%&()*+,-./:;?@[\\]^_`{|}~')


def preprocess_text(text, do_lower_case=False, remove_space=True, keep_accents=False):
    """XLNet's text preprocessing, as transformers' `XLNetTokenizer`.

    Args:
        text: str.
        do_lower_case: bool. Lowercase: first character by character (as
            transformers' `tokenize`), then the whole string (as the
            original `preprocess_text`, which maps a word-final capital
            sigma that NFKD produced, e.g. from "𝚺", to "ς").
        remove_space: bool. Strip, and join the words of `str.split()`
            (any Unicode whitespace) with one space.
        keep_accents: bool. Skip NFKD and the dropping of combining marks.

    Returns:
        str.
    """
    if do_lower_case:
        text = text.replace("\u03a3", "\u03c3").lower()  # = lowercasing each character
    if remove_space:
        text = " ".join(text.strip().split())
    text = text.replace("``", '"').replace("''", '"')
    if not keep_accents:
        text = unicodedata.normalize("NFKD", text)
        text = "".join(c for c in text if not unicodedata.combining(c))
    if do_lower_case:
        text = text.lower()
    return text


def fix_digit_comma(pieces, encode):
    """`encode_pieces`' rule: a piece of 2+ characters ending in a digit
    (`str.isdigit`) and "," is replaced by `encode(piece without "," and
    "▁")` and ",". When the piece did not start a word, the first new
    piece loses its "▁" (and goes if it was just "▁")."""
    out = []
    for piece in pieces:
        if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
            new = encode(piece[:-1].replace(SPIECE_UNDERLINE, ""))
            if piece[0] != SPIECE_UNDERLINE and new[0][0] == SPIECE_UNDERLINE:
                new = new[1:] if len(new[0]) == 1 else [new[0][1:], *new[1:]]
            out += [*new, ","]
        else:
            out.append(piece)
    return out


class TextTypeError(TypeError, ValueError):
    """A text that is not a str or bytes (a `ValueError` too: it was one before)."""


def _check_text(text, name="text"):
    if isinstance(text, bytes):
        return text.decode("utf-8", errors="replace")
    if not isinstance(text, str):
        shown = repr(text) if len(repr(text)) <= 60 else repr(text)[:57] + "..."
        raise TextTypeError(f"Expected text as str or UTF-8 bytes in `{name}`. Received: "
                            f"{shown} of type {type(text).__name__}.")
    return text


def _check_texts(texts, name):
    """`_check_text` on every item of a list, naming the item's index."""
    for index, text in enumerate(texts):
        _check_text(text, f"{name}[{index}]")


class XLNetTokenizer:
    """XLNet's SentencePiece tokenizer with the original preprocessing.

    Ids match transformers 4's sentencepiece-based `XLNetTokenizer` with
    `split_special_tokens=True` (control symbols typed in text are text).
    The special ids are read from the model: XLNet's has <unk>=0 <s>=1
    </s>=2 <cls>=3 <sep>=4 <pad>=5 <mask>=6 <eod>=7 <eop>=8, as the models
    `learn_sentencepiece` writes.

    Args:
        model_file: str. A SentencePiece model (`spiece.model`).
        do_lower_case: bool. True for uncased models.
        remove_space: bool. Collapse whitespace runs to one space.
        keep_accents: bool. Skip NFKD and the removal of combining marks.

    Example:
    >>> tokenizer = XLNetTokenizer("spiece.model")
    >>> ids, type_ids = tokenizer.build_inputs(tokenizer.encode("Hello"))
    >>> ids[-2:] == [tokenizer.sep_id, tokenizer.cls_id], type_ids[-1]
    (True, 2)
    """

    def __init__(self, model_file, do_lower_case=False, remove_space=True, keep_accents=False):
        model_file = os.fspath(model_file)
        if not os.path.isfile(model_file):
            raise ValueError(f"No SentencePiece model file at `model_file`. Received: {model_file!r}.")
        self.model_file = model_file
        self.do_lower_case = do_lower_case
        self.remove_space = remove_space
        self.keep_accents = keep_accents
        self.sp_model = sentencepiece.SentencePieceProcessor()
        try:
            self.sp_model.Load(model_file)
        except (OSError, RuntimeError) as error:
            raise ValueError(
                f"{model_file!r} is not a SentencePiece model: {error}") from None
        missing = [
            symbol for symbol in SPECIAL_SYMBOLS.values()
            if self.sp_model.IdToPiece(self.sp_model.PieceToId(symbol)) != symbol
        ]
        if missing:
            raise ValueError(
                f"{model_file} has no piece for {missing}; XLNet needs "
                f"{list(SPECIAL_SYMBOLS.values())} (see `learn_sentencepiece`).")
        for name, symbol in SPECIAL_SYMBOLS.items():
            setattr(self, f"{name}_id", self.sp_model.PieceToId(symbol))
        self._start_pieces = None

    @property
    def vocab_size(self):
        return self.sp_model.GetPieceSize()

    def piece_to_id(self, piece):
        """The id of `piece`, or `unk_id` if the model has no such piece."""
        return self.sp_model.PieceToId(piece)

    def id_to_piece(self, index):
        index = int(index)
        if not 0 <= index < self.vocab_size:
            raise ValueError(
                f"Id {index} is outside the vocabulary of {self.vocab_size} pieces.")
        return self.sp_model.IdToPiece(index)

    def preprocess(self, text):
        """`preprocess_text` with this tokenizer's options."""
        return preprocess_text(
            _check_text(text), self.do_lower_case, self.remove_space, self.keep_accents)

    def tokenize(self, text):
        """Pieces (str) of `text` (str or UTF-8 bytes)."""
        pieces = self.sp_model.EncodeAsPieces(self.preprocess(text))
        return fix_digit_comma(pieces, self.sp_model.EncodeAsPieces)

    def encode(self, text):
        """Ids of `text`, no special tokens; a list of texts gives a list of lists."""
        if not isinstance(text, (str, bytes)):
            if isinstance(text, (list, tuple)):
                _check_texts(text, "text")
                return [self.encode(t) for t in text]
            _check_text(text)
        pieces = self.tokenize(text)
        return self.sp_model.PieceToId(pieces) if pieces else []

    def is_start_piece(self, index):
        """Whether piece `index` starts a word, as the original
        `data_utils._is_start_piece`: it starts with "▁" or "<" (every
        control symbol does), or is one single ASCII punctuation mark of
        `START_PUNCTUATION`. The pretraining data's span masking snaps
        spans to these."""
        if self._start_pieces is None:
            self._start_pieces = np.array([
                p.startswith((SPIECE_UNDERLINE, "<")) or p in START_PUNCTUATION
                for p in map(self.sp_model.IdToPiece, range(self.vocab_size))
            ])
        index = int(index)
        if not 0 <= index < self.vocab_size:
            raise ValueError(
                f"Id {index} is outside the vocabulary of {self.vocab_size} pieces.")
        return bool(self._start_pieces[index])

    def build_inputs(self, ids_a, ids_b=None):
        """XLNet's fine-tuning layout: `A <sep> <cls>` or `A <sep> B <sep> <cls>`,
        <cls> last. Returns `(ids, segment_ids)` with A=0 (its <sep> too),
        B=1 (its <sep> too), <cls>=2, as transformers'
        `build_inputs_with_special_tokens` and
        `create_token_type_ids_from_sequences`."""
        ids = [*ids_a, self.sep_id]
        segment_ids = [SEG_ID_A] * len(ids)
        if ids_b is not None:
            ids += [*ids_b, self.sep_id]
            segment_ids += [SEG_ID_B] * (len(ids_b) + 1)
        return ids + [self.cls_id], segment_ids + [SEG_ID_CLS]

    def __call__(self, texts, text_pairs=None, max_length=512):
        """Tokenizes, packs and left-pads a batch, as XLNet's `classifier_utils`.

        A is cut to `max_length - 2` ids; a pair is trimmed longest first
        (B when equal) to `max_length - 3`. Padding goes on the left, so
        <cls> is always the last position (XLNet pools from it).

        Args:
            texts: str or list of str.
            text_pairs: optional str or list of str, one per text.
            max_length: int. Length of every row, special tokens included.

        Returns:
            dict of int32 `(batch, max_length)` arrays: `input_word_ids`
            (padded with `pad_id`, as transformers; the original padded
            with 0: padding is masked either way), `input_type_ids`
            (padding `SEG_ID_PAD`=4, as the original) and `input_mask`, 1
            on padding and 0 on tokens (XLNet's convention, the inverse of
            BERT's).
        """
        texts = [texts] if isinstance(texts, (str, bytes)) else list(texts)
        _check_texts(texts, "texts")
        if text_pairs is not None:
            text_pairs = [text_pairs] if isinstance(text_pairs, (str, bytes)) else list(text_pairs)
            _check_texts(text_pairs, "text_pairs")
            if len(text_pairs) != len(texts):
                raise ValueError(
                    f"Got {len(texts)} texts but {len(text_pairs)} text_pairs; "
                    "they pair up one to one.")
        budget = max_length - (2 if text_pairs is None else 3)
        if budget < 0:
            raise ValueError(
                f"`max_length` must leave room for the special tokens. Received: {max_length}.")
        word_ids = np.full((len(texts), max_length), self.pad_id, np.int32)
        type_ids = np.full((len(texts), max_length), SEG_ID_PAD, np.int32)
        mask = np.ones((len(texts), max_length), np.int32)
        for row, text in enumerate(texts):
            ids_a = self.encode(text)
            ids_b = None
            if text_pairs is None:
                ids_a = ids_a[:budget]
            else:
                ids_b = self.encode(text_pairs[row])
                truncate_seq_pair(ids_a, ids_b, budget)
            ids, segment_ids = self.build_inputs(ids_a, ids_b)
            start = max_length - len(ids)
            word_ids[row, start:] = ids
            type_ids[row, start:] = segment_ids
            mask[row, start:] = 0
        return {"input_word_ids": word_ids, "input_type_ids": type_ids, "input_mask": mask}

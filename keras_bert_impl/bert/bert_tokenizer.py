"""`BertTokenizer`: text to BERT ids, in plain Python, as the original."""

import numpy as np

from keras_bert_impl.bert.wordpiece import WordpieceTokenizer
from keras_bert_impl.bert.wordpiece import load_vocab
from keras_bert_impl.tokenizers.basic_tokenizer import BasicTokenizer
from keras_bert_impl.tokenizers.basic_tokenizer import check_texts
from keras_bert_impl.tokenizers.pairs import truncate_seq_pair

# Distinct words whose WordPiece split `BertTokenizer.tokenize` keeps. Memory
# measured: 1.4 MB for the main job's corpus (7,918 distinct words), 115 MB
# for 200,000 random 8-letter words (many pieces each): 50,000 bounds it
# near 30 MB, and Zipf's law puts most running words among the first ones.
_WORD_CACHE_SIZE = 50_000

PADDING = ("max_length", "longest")


def padded_inputs(rows, length, pad_token_id):
    """Packed `(ids, type_ids)` rows -> the model's three int32 `(N, length)` arrays."""
    word_ids = np.full((len(rows), length), pad_token_id, np.int32)
    mask = np.zeros((len(rows), length), np.int32)
    type_ids = np.zeros((len(rows), length), np.int32)
    for row, (ids, types) in enumerate(rows):
        word_ids[row, : len(ids)] = ids
        mask[row, : len(ids)] = 1
        type_ids[row, : len(ids)] = types
    return {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": type_ids}


class BertTokenizer:
    """BasicTokenizer + WordPiece with the original `tokenization.py` rules.

    Args:
        vocab_file: str. `vocab.txt`, one token per line.
        do_lower_case: bool. True for uncased checkpoints.
        max_input_chars_per_word: int. Longer words become [UNK] (200, as
            the original).
        tokenize_chinese_chars: bool. Spaces around CJK ideographs.
        normalize_nfc: bool. NFC after cleaning, as Hugging Face's port;
            off by default, as the original.

    Example:
    >>> tokenizer = BertTokenizer("vocab.txt")
    >>> batch = tokenizer(["Hello world!"], ["Second segment."], max_length=16)
    >>> batch["input_word_ids"].shape
    (1, 16)
    """

    def __init__(
        self,
        vocab_file,
        do_lower_case=True,
        max_input_chars_per_word=200,
        tokenize_chinese_chars=True,
        normalize_nfc=False,
    ):
        self.vocab_file = vocab_file
        self.vocab = load_vocab(vocab_file)
        self.inv_vocab = {i: t for t, i in self.vocab.items()}
        self.do_lower_case = do_lower_case
        self.basic_tokenizer = BasicTokenizer(
            do_lower_case=do_lower_case,
            tokenize_chinese_chars=tokenize_chinese_chars,
            normalize_nfc=normalize_nfc,
        )
        self.wordpiece_tokenizer = WordpieceTokenizer(
            self.vocab, unk_token="[UNK]", max_input_chars_per_word=max_input_chars_per_word
        )
        # A word's WordPiece split, once per distinct word: words repeat
        # (Zipf), and the greedy search tries up to len(word) prefixes.
        self._pieces_of = {}
        for name in ("pad", "unk", "cls", "sep", "mask"):
            token = f"[{name.upper()}]"
            if token not in self.vocab:
                raise ValueError(f"{vocab_file} has no {token} token; BERT needs it.")
            setattr(self, f"{name}_token_id", self.vocab[token])

    @property
    def vocab_size(self):
        return len(self.inv_vocab)

    def tokenize_with_offsets(self, text):
        """`[(token, (start, end)), ...]`: `text[start:end]` is where the token
        came from (the whole word for [UNK]; the original spelling where
        lowercasing or accent stripping changed it)."""
        pieces = []
        for word, origins in self.basic_tokenizer.tokenize_with_origins(text):
            for piece, (a, b) in self.wordpiece_tokenizer.tokenize_word(word):
                pieces.append((piece, (origins[a], origins[b - 1] + 1)))
        return pieces

    def tokenize(self, text):
        """WordPiece tokens of `text`."""
        tokens, pieces_of = [], self._pieces_of
        for word in self.basic_tokenizer.tokenize(text):
            pieces = pieces_of.get(word)
            if pieces is None:
                pieces = [piece for piece, _ in self.wordpiece_tokenizer.tokenize_word(word)]
                if len(pieces_of) < _WORD_CACHE_SIZE:
                    pieces_of[word] = pieces
            tokens.extend(pieces)
        return tokens

    def convert_tokens_to_ids(self, tokens):
        return [self.vocab.get(token, self.unk_token_id) for token in tokens]

    def convert_ids_to_tokens(self, ids):
        try:
            return [self.inv_vocab[int(i)] for i in ids]
        except KeyError as e:
            raise ValueError(
                f"Id {e.args[0]} is outside the vocabulary of {self.vocab_size} tokens."
            ) from None

    def encode(self, text, text_pair=None, max_length=None):
        """Ids of `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, truncated as the
        original when `max_length` is given; no padding."""
        if max_length is not None:
            _check_max_length(max_length, text_pair is not None)
        a = self.convert_tokens_to_ids(self.tokenize(text))
        b = None if text_pair is None else self.convert_tokens_to_ids(self.tokenize(text_pair))
        ids, _ = self._pack(a, b, max_length, truncation=True)
        return ids

    def decode(self, ids, skip_special_tokens=True):
        """Readable text: tokens joined by spaces, "##" pieces glued on."""
        special = {self.pad_token_id, self.cls_token_id, self.sep_token_id}
        tokens = self.convert_ids_to_tokens(
            [i for i in ids if not (skip_special_tokens and int(i) in special)]
        )
        return " ".join(tokens).replace(" ##", "").replace("##", "")

    def __call__(self, texts, text_pairs=None, max_length=128, padding="max_length", truncation=True):
        """Tokenizes and packs a batch into the model's three inputs.

        Args:
            texts: str or list of str (segment A).
            text_pairs: optional str or list of str (segment B), same count.
            max_length: int. Length with the special tokens.
            padding: "max_length" (every row `max_length`; static shapes
                for TPUs and XLA) or "longest" (the longest row).
            truncation: bool. Trim as the original (pairs: longest first);
                False raises `ValueError` for a row that does not fit.

        Returns:
            dict of int32 `(batch, length)` arrays `input_word_ids`,
            `input_mask`, `input_type_ids`.
        """
        if padding not in PADDING:
            raise ValueError(f"`padding` must be one of {PADDING}. Received: {padding!r}.")
        _check_max_length(max_length, text_pairs is not None)
        texts = _text_list(texts, "texts")
        if text_pairs is not None:
            text_pairs = _text_list(text_pairs, "text_pairs")
            if len(text_pairs) != len(texts):
                raise ValueError(
                    f"Got {len(texts)} texts but {len(text_pairs)} text_pairs; they pair up one to one."
                )
        rows = []
        for index, text in enumerate(texts):
            a = self.convert_tokens_to_ids(self.tokenize(text))
            b = None
            if text_pairs is not None:
                b = self.convert_tokens_to_ids(self.tokenize(text_pairs[index]))
            try:
                rows.append(self._pack(a, b, max_length, truncation))
            except ValueError as e:
                raise ValueError(f"Row {index}: {e}") from None
        length = max_length if padding == "max_length" else max(len(ids) for ids, _ in rows)
        return padded_inputs(rows, length, self.pad_token_id)

    def _pack(self, a, b, max_length, truncation):
        a = list(a)
        b = None if b is None else list(b)
        if max_length is not None:
            budget = max_length - (3 if b is not None else 2)
            total = len(a) + (len(b) if b is not None else 0)
            if total > budget and not truncation:
                raise ValueError(
                    f"{total} tokens do not fit max_length={max_length} with the special "
                    "tokens; pass truncation=True or a larger max_length."
                )
            if b is not None:
                truncate_seq_pair(a, b, budget)
            else:
                del a[budget:]
        ids = [self.cls_token_id, *a, self.sep_token_id]
        types = [0] * len(ids)
        if b is not None:
            ids += [*b, self.sep_token_id]
            types += [1] * (len(b) + 1)
        return ids, types


def _text_list(texts, name):
    """A str (or bytes) or an iterable of them -> a list; `TypeError` naming
    the argument, and the index and type of a bad item."""
    if isinstance(texts, (str, bytes)):
        return [texts]
    try:
        texts = list(texts)
    except TypeError:
        raise TypeError(f"`{name}` must be a str or a list of str. Received: "
                        f"{type(texts).__name__}.") from None
    check_texts(texts, name)
    return texts


def _check_max_length(max_length, pair):
    """[CLS] A [SEP] needs 2 positions, [CLS] A [SEP] B [SEP] 3."""
    need = 3 if pair else 2
    if not isinstance(max_length, (int, np.integer)) or max_length < need:
        raise ValueError(
            f"`max_length` must be an integer >= {need}: room for [CLS] and [SEP]"
            f"{' twice' if pair else ''}. Received: max_length={max_length!r}.")

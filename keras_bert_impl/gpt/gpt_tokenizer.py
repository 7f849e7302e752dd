"""`GptTokenizer`: text to OpenAI GPT byte-pair-encoding ids, in plain Python.

GPT (Radford et al. 2018) splits words into subwords with byte-pair
encoding (Sennrich et al. 2016): a word starts as its characters, the last
one marked with "</w>", and the pair listed earliest in `merges.txt` is
merged everywhere in the word, again and again, until no listed pair is
left. The released tokenizer found words with spaCy after ftfy; Hugging
Face's port, without those, finds them with BERT's BasicTokenizer. This
is that path, id for id: transformers 4's pure-Python `OpenAIGPTTokenizer`
(the goldens test checks 2,000+ strings).
"""

import json
import unicodedata

import numpy as np

from keras_bert_impl.gpt.gpt_config import FINE_TUNING_TOKENS
from keras_bert_impl.tokenizers.basic_tokenizer import BasicTokenizer
from keras_bert_impl.tokenizers.basic_tokenizer import check_texts
from keras_bert_impl.tokenizers.pairs import truncate_seq_pair

END_OF_WORD = "</w>"
UNK_TOKEN = "<unk>"


def load_bpe_files(vocab_file, merges_file):
    """Reads Hugging Face's `vocab.json` and `merges.txt`.

    Returns:
        `(vocab, ranks)`: dict token -> id, with "<unk>" added after the
        largest id if the file lacks it (as transformers does); dict
        `(left, right)` -> rank, 0 merged first.

    `merges.txt` is a "#version" line, then one "left right" pair a line.
    As the reference, a pair listed twice keeps its later place and lines
    without exactly two symbols are ignored; unlike it, a first line that is
    not "#version..." is read as a pair and a last line without "\\n" is kept.
    """
    with open(vocab_file, encoding="utf-8") as f:
        vocab = json.load(f)
    if not isinstance(vocab, dict) or not vocab:
        raise ValueError(f"{vocab_file} is not a non-empty JSON object of token -> id.")
    bad = [(t, i) for t, i in vocab.items() if not isinstance(i, int) or i < 0]
    if bad:
        raise ValueError(f"{vocab_file}: ids must be non-negative integers. Received: {bad[:3]}.")
    if UNK_TOKEN not in vocab:
        vocab[UNK_TOKEN] = max(vocab.values()) + 1
    with open(merges_file, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[0].startswith("#version"):
        lines = lines[1:]
    last_line = {}
    for index, line in enumerate(lines):
        parts = line.split()
        if len(parts) == 2:
            last_line[tuple(parts)] = index
    ordered = sorted(last_line, key=last_line.get)
    _check_pair(vocab, ordered, vocab_file, merges_file)
    return vocab, {pair: rank for rank, pair in enumerate(ordered)}


def _check_pair(vocab, merges, vocab_file, merges_file):
    """`ValueError` when `merges` and `vocab` come from different BPE runs:
    every merge of one run makes a token of its vocabulary, so a merge whose
    token is missing tokenizes to `<unk>`. A few are tolerated (a release
    may list merges past its vocabulary's cut); more than 1% (at least 10)
    means another run's merges.txt, which would tokenize every row otherwise
    and quietly."""
    missing = [left + right for left, right in merges if left + right not in vocab]
    if len(missing) > max(10, len(merges) // 100):
        raise ValueError(
            f"{merges_file} and {vocab_file} are not one BPE pair: {len(missing)} of its "
            f"{len(merges)} merges make tokens the vocabulary lacks (e.g. {missing[0]!r}). "
            "Pass the merges.txt written with this vocab.json.")


def bpe(word, ranks):
    """Byte-pair encoding of one word: its symbols (str), the last with "</w>".

    Repeatedly takes the adjacent pair with the lowest rank and merges all
    its occurrences, left to right without overlap ("a a a" -> "aa a"),
    until no adjacent pair has a rank.
    """
    symbols = [*word[:-1], word[-1] + END_OF_WORD]
    while len(symbols) > 1:
        best, best_rank = None, None
        for pair in zip(symbols, symbols[1:]):
            rank = ranks.get(pair)
            if rank is not None and (best_rank is None or rank < best_rank):
                best, best_rank = pair, rank
        if best is None:
            break
        symbols = merge_pair(symbols, *best)
    return symbols


def merge_pair(symbols, left, right):
    """`symbols` with every `left right` merged, left to right."""
    merged, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == left and symbols[i + 1] == right:
            merged.append(left + right)
            i += 2
        else:
            merged.append(symbols[i])
            i += 1
    return merged


class GptBasicTokenizer(BasicTokenizer):
    """BERT's BasicTokenizer with the rules Hugging Face runs it with for GPT.

    Three differences from the original BERT rules, all the reference's:
    every Unicode category C* character is dropped (also unassigned Cn,
    private use Co and surrogates Cs; the original drops only Cc and Cf),
    text is NFC-normalized after cleaning, and lowercasing is character by
    character (capital sigma always becomes "σ", never the final "ς").
    """

    def __init__(self):
        super().__init__(do_lower_case=True, tokenize_chinese_chars=True, normalize_nfc=True)

    def drops(self, char):
        if char in ("\t", "\n", "\r"):
            return False  # whitespace
        return char == "\ufffd" or unicodedata.category(char)[0] == "C"

    def lowercase(self, word):
        # Only the Greek capital sigma lowercases differently in context.
        return word.replace("\u03a3", "\u03c3").lower()


class GptTokenizer:
    """GPT's BPE tokenizer: BasicTokenizer words, then BPE, then ids.

    Ids match transformers' pure-Python `OpenAIGPTTokenizer` without ftfy
    and spaCy. Characters outside the vocabulary become "<unk>". Text is
    never read as special tokens: "_start_" typed in text is split like any
    text. GPT's fine-tuning tokens `_start_`, `_delimiter_`, `_classify_`
    get the ids right after the vocabulary (`vocab_size`, +1, +2).

    Args:
        vocab_file: str. `vocab.json`, token -> id.
        merges_file: str. `merges.txt`, "#version" then "left right" lines.

    Example:
    >>> tokenizer = GptTokenizer("vocab.json", "merges.txt")
    >>> ids = tokenizer.encode("Hello world!")
    >>> tokenizer.decode(ids)
    'hello world !'
    """

    def __init__(self, vocab_file, merges_file):
        self.vocab_file = vocab_file
        self.merges_file = merges_file
        self.vocab, self.ranks = load_bpe_files(vocab_file, merges_file)
        self.unk_token_id = self.vocab[UNK_TOKEN]
        self.vocab_size = max(self.vocab.values()) + 1
        self.inv_vocab = {i: t for t, i in self.vocab.items()}
        self.basic_tokenizer = GptBasicTokenizer()
        self.special_tokens = {}
        self._cache = {}
        self.start_token_id, self.delimiter_token_id, self.classify_token_id = (
            self.add_special_tokens(FINE_TUNING_TOKENS)
        )

    def __len__(self):
        """Every id this tokenizer can give: the vocabulary and added tokens."""
        return self.vocab_size + len(self.special_tokens)

    def add_special_tokens(self, tokens):
        """Appends tokens after the vocabulary and earlier ones; returns
        their ids. A token already in the vocabulary keeps its id, as in
        transformers. Text never yields them: packing (or ids) does."""
        ids = []
        for token in tokens:
            if token not in self.vocab and token not in self.special_tokens:
                self.special_tokens[token] = len(self)
                self.inv_vocab[self.special_tokens[token]] = token
            ids.append(self.token_to_id(token))
        return ids

    def token_to_id(self, token):
        """The id of `token`, or `unk_token_id`."""
        if token in self.special_tokens:
            return self.special_tokens[token]
        return self.vocab.get(token, self.unk_token_id)

    def id_to_token(self, index):
        try:
            return self.inv_vocab[int(index)]
        except KeyError:
            raise ValueError(
                f"Id {index} is outside the vocabulary of {len(self)} tokens."
            ) from None

    def tokenize(self, text):
        """BPE symbols of `text` (str or UTF-8 bytes), "</w>" ending each
        word; as the reference, a symbol outside the vocabulary is kept as
        is here and becomes `unk_token_id` in `encode`."""
        return [s for word in self.basic_tokenizer.tokenize(text) for s in self._bpe(word)[0]]

    def _bpe(self, word):
        """`(symbols, ids)` of one word, cached as the reference does."""
        cached = self._cache.get(word)
        if cached is None:
            if len(self._cache) >= 100_000:  # a bound keeps memory flat
                self._cache.clear()
            symbols = bpe(word, self.ranks)
            cached = (symbols, [self.vocab.get(s, self.unk_token_id) for s in symbols])
            self._cache[word] = cached
        return cached

    def encode(self, text):
        """Ids of `text`, no special tokens; a list of str gives a list of lists."""
        if not isinstance(text, (str, bytes)):
            try:
                texts = list(text)
            except TypeError:
                raise TypeError(f"`text` must be a str or a list of str. Received: "
                                f"{type(text).__name__}.") from None
            check_texts(texts, "text")
            return [self.encode(t) for t in texts]
        return [i for word in self.basic_tokenizer.tokenize(text) for i in self._bpe(word)[1]]

    def decode(self, ids, skip_special_tokens=False):
        """Text of `ids`: tokens glued together, "</w>" read as a space.

        Special tokens stand apart, separated by spaces, as transformers
        decodes them; `skip_special_tokens=True` leaves them out.
        """
        pieces, run = [], []
        for index in ids:
            token = self.id_to_token(index)
            if token in self.special_tokens:
                pieces.append("".join(run).replace(END_OF_WORD, " ").strip())
                run = []
                if not skip_special_tokens:
                    pieces.append(token)
            else:
                run.append(token)
        pieces.append("".join(run).replace(END_OF_WORD, " ").strip())
        return " ".join(p for p in pieces if p)

    def pack(self, ids_a, ids_b=None, max_length=512):
        """GPT's fine-tuning input: `_start_ A _classify_` or
        `_start_ A _delimiter_ B _classify_`, truncated longest first (as
        BERT) to `max_length`. Returns the list of ids."""
        a = list(ids_a)
        b = None if ids_b is None else list(ids_b)
        budget = max_length - (2 if b is None else 3)
        if budget < 0:
            raise ValueError(
                f"`max_length` must leave room for the special tokens. Received: {max_length}."
            )
        if b is None:
            return [self.start_token_id, *a[:budget], self.classify_token_id]
        truncate_seq_pair(a, b, budget)
        return [self.start_token_id, *a, self.delimiter_token_id, *b, self.classify_token_id]

    def __call__(self, texts, text_pairs=None, max_length=512):
        """Tokenizes and packs a batch into the backbone's inputs.

        Args:
            texts: str or list of str.
            text_pairs: optional str or list of str, one per text.
            max_length: int. Length of every row, special tokens included.

        Returns:
            dict of int32 `(batch, max_length)` arrays `input_word_ids`
            (padded with 0) and `input_mask` (1 for real tokens).
        """
        texts = [texts] if isinstance(texts, (str, bytes)) else list(texts)
        check_texts(texts, "texts")
        if text_pairs is not None:
            text_pairs = [text_pairs] if isinstance(text_pairs, (str, bytes)) else list(text_pairs)
            check_texts(text_pairs, "text_pairs")
            if len(text_pairs) != len(texts):
                raise ValueError(
                    f"Got {len(texts)} texts but {len(text_pairs)} text_pairs; "
                    "they pair up one to one."
                )
        word_ids = np.zeros((len(texts), max_length), np.int32)
        mask = np.zeros((len(texts), max_length), np.int32)
        for row, text in enumerate(texts):
            pair = None if text_pairs is None else self.encode(text_pairs[row])
            ids = self.pack(self.encode(text), pair, max_length)
            word_ids[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1
        return {"input_word_ids": word_ids, "input_mask": mask}

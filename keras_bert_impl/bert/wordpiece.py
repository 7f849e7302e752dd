"""WordPiece: vocabulary files and greedy longest-match-first splitting."""

import collections


def load_vocab(path):
    """`vocab.txt` (one token per line, id = line number) -> {token: id}.

    As the original: each line is stripped of surrounding whitespace, and a
    token listed twice maps to its last line.
    """
    vocab = collections.OrderedDict()
    with open(path, encoding="utf-8") as f:
        for index, line in enumerate(f):
            vocab[line.strip()] = index
    if not vocab:
        raise ValueError(f"{path} is empty: not a vocabulary.")
    return vocab


class WordpieceTokenizer:
    """Greedy longest-match-first WordPiece, as the original.

    A word is split into the longest vocabulary prefix, then the longest
    "##"-prefixed continuation, and so on; if some remainder matches nothing
    the whole word becomes `unk_token`. Words longer than
    `max_input_chars_per_word` characters become `unk_token` at once.

    Args:
        vocab: dict token -> id.
        unk_token: str.
        max_input_chars_per_word: int. 200, as the original.
    """

    def __init__(self, vocab, unk_token="[UNK]", max_input_chars_per_word=200):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word

    def tokenize_word(self, word):
        """`[(piece, (start, end)), ...]` with spans relative to the word."""
        if len(word) > self.max_input_chars_per_word:
            return [(self.unk_token, (0, len(word)))]
        pieces = []
        start = 0
        while start < len(word):
            end = len(word)
            match = None
            while start < end:
                candidate = word[start:end] if start == 0 else "##" + word[start:end]
                if candidate in self.vocab:
                    match = candidate
                    break
                end -= 1
            if match is None:
                return [(self.unk_token, (0, len(word)))]
            pieces.append((match, (start, end)))
            start = end
        return pieces

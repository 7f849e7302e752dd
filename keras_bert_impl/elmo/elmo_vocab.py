"""ELMo's word vocabulary, as bilm-tf's `vocab.txt`: the LM softmax's rows.

One token a line, `<S>`, `</S>`, `<UNK>` first (ids 0, 1, 2), then the
words of the training text by falling frequency. The order matters beyond
readability: bilm-tf's sampled softmax draws negatives from TensorFlow's
log-uniform (Zipfian) sampler, which assumes id k is the k-th most
frequent token. The characters of a token, not its id, are the biLM's
input, so a word outside the vocabulary still reaches the model intact; the
vocabulary only names the softmax's targets (`<UNK>` for the rest).
"""

import collections
import os

from keras_bert_impl.elmo.char_ids import BOS_TOKEN
from keras_bert_impl.elmo.char_ids import EOS_TOKEN

UNK_TOKEN = "<UNK>"
SPECIAL_TOKENS = (BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)  # ids 0, 1, 2, as bilm-tf's files


def learn_elmo_vocab(sentences, max_size=None, min_count=1):
    """A bilm-tf vocabulary from tokenized text.

    Args:
        sentences: iterable of str (one whitespace-tokenized sentence
            each, bilm-tf's training format) or of token lists.
        max_size: int or None. Tokens kept, the three specials included
            (the rest become `<UNK>`); None keeps every word.
        min_count: int. Words seen fewer times are left out.

    Returns:
        list of str: `<S>`, `</S>`, `<UNK>`, then words by falling count
        (ties in order of first appearance, so the result is a pure
        function of the text).

    Example:
    >>> learn_elmo_vocab(["the cat", "the dog"])
    ['<S>', '</S>', '<UNK>', 'the', 'cat', 'dog']
    """
    if max_size is not None and (isinstance(max_size, bool) or not isinstance(max_size, int)
                                 or max_size < len(SPECIAL_TOKENS)):
        raise ValueError(
            f"`max_size` must be an integer >= {len(SPECIAL_TOKENS)} (the special tokens) or "
            f"None. Received: max_size={max_size!r}.")
    counts = collections.Counter()
    for sentence in sentences:
        counts.update(sentence.split() if isinstance(sentence, str) else sentence)
    for token in SPECIAL_TOKENS:
        counts.pop(token, None)
    # Counter keeps first-appearance order; sorted() is stable.
    words = [w for w, n in sorted(counts.items(), key=lambda item: -item[1]) if n >= min_count]
    if max_size is not None:
        words = words[:max_size - len(SPECIAL_TOKENS)]
    return [*SPECIAL_TOKENS, *words]


def write_elmo_vocab(tokens, path):
    """Writes a vocabulary (one token a line) atomically."""
    check_elmo_vocab(tokens, path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("".join(f"{token}\n" for token in tokens))
    os.replace(tmp, path)


def load_elmo_vocab(path):
    """Reads a bilm-tf vocabulary file; refuses one that does not start
    `<S>`, `</S>`, `<UNK>`.

    Returns:
        list of str, id order.

    Example:
    >>> tokens = load_elmo_vocab("vocab.txt")
    >>> {token: i for i, token in enumerate(tokens)}["<UNK>"]
    2
    """
    if not os.path.isfile(path):
        raise ValueError(f"ELMo vocabulary file {path} does not exist.")
    try:
        with open(path, encoding="utf-8") as f:
            tokens = [line.strip() for line in f]
    except UnicodeDecodeError as e:
        raise ValueError(f"ELMo vocabulary file {path} is not UTF-8 text: {e}") from None
    while tokens and not tokens[-1]:
        tokens.pop()  # a trailing blank line
    # bilm-tf's reader skips this marker of the 1B Word Benchmark's vocabulary.
    tokens = [t for t in tokens if t != "!!!MAXTERMID"]
    check_elmo_vocab(tokens, path)
    return tokens


def check_elmo_vocab(tokens, source="the vocabulary"):
    """`ValueError` naming `source` unless `tokens` starts with the three
    specials and holds no empty or repeated token."""
    head = list(tokens[:len(SPECIAL_TOKENS)])
    if head != list(SPECIAL_TOKENS):
        raise ValueError(
            f"ELMo vocabulary {source} must start with {', '.join(SPECIAL_TOKENS)} (one a line, "
            f"in that order, as bilm-tf's). Its first lines are {head!r}. Build one with "
            "`learn_elmo_vocab`.")
    seen = set()
    for number, token in enumerate(tokens, start=1):
        if not token or token.split() != [token]:
            raise ValueError(f"ELMo vocabulary {source}: line {number} is {token!r}, not one "
                             "token (empty or with spaces).")
        if token in seen:
            raise ValueError(f"ELMo vocabulary {source}: {token!r} appears twice (again on line "
                             f"{number}).")
        seen.add(token)

"""Pretraining instances: NSP segment pairs and MLM masking, on token ids.

The semantics of google-research/bert `create_pretraining_data.py`
(`create_instances_from_document`, `create_masked_lm_predictions`,
`truncate_seq_pair`), including its quirks, which are the default:

- NSP: a chunk of a single segment always takes a random next segment, so
  the random share is somewhat above 50%. `exact_nsp=True` flips a fair coin
  for every pair instead (a one-segment chunk whose coin says "actual next"
  is split inside the segment).
- MLM: the random replacement (10%) is drawn from the whole vocabulary,
  special tokens included; `random_token_excludes_special=True` redraws
  those. `num_to_predict` counts [CLS] and [SEP] in the length, as the
  original.

Everything works on ids: `is_subword[id]` says whether a token starts with
"##" (for whole-word masking). With a Chinese word segmenter
(`chinese_word_segmenter`), a token that continues a segmented word comes
as `id + vocab_size` (`chinese_words.py`) and joins its word as a "##"
piece does.
"""

import dataclasses
import itertools
import random

from tf_records.bert.chinese_words import SEGMENTERS
from tf_records.bert.chinese_words import split_marks

# What one row holds: BERT's segment pair with an NSP label, or RoBERTa's
# rows of whole sentences without NSP (`sentence_packing.py`).
SEGMENT_PAIR = "segment_pair"
FULL_SENTENCES = "full_sentences"
DOC_SENTENCES = "doc_sentences"
INPUT_FORMATS = (SEGMENT_PAIR, FULL_SENTENCES, DOC_SENTENCES)


@dataclasses.dataclass(frozen=True)
class InstanceConfig:
    """The original script's flags that shape instances, with its defaults."""

    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    do_whole_word_mask: bool = False
    exact_nsp: bool = False
    random_token_excludes_special: bool = False
    # Write no masks; the reader masks anew each epoch (dynamic masking).
    unmasked: bool = False
    # Mask each instance as it is made, with the original's per-token
    # `random.Random` draws: a corpus in one block then gives the original
    # script's exact records, ~3x slower. Otherwise instances come out
    # unmasked and the writer masks a whole block at once (`masking.py`).
    original_rng: bool = False
    input_format: str = SEGMENT_PAIR  # one of INPUT_FORMATS
    # "" (words from "##" pieces only) or one of `chinese_words.SEGMENTERS`:
    # whole-word masking also takes the characters of a segmented Chinese
    # word together (Chinese-BERT-wwm), the tokens staying characters.
    chinese_word_segmenter: str = ""

    def __post_init__(self):
        if self.input_format not in INPUT_FORMATS:
            raise ValueError(f"`input_format` must be one of {', '.join(INPUT_FORMATS)}. "
                             f"Received: {self.input_format!r}.")
        if self.max_seq_length < 5:
            raise ValueError(f"`max_seq_length` must be >= 5. Received: {self.max_seq_length}.")
        if not 0 < self.masked_lm_prob < 1:
            raise ValueError(f"`masked_lm_prob` must be in (0, 1). Received: {self.masked_lm_prob}.")
        if not 0 <= self.short_seq_prob <= 1:
            raise ValueError(
                f"`short_seq_prob` must be in [0, 1]. Received: {self.short_seq_prob}.")
        if self.max_predictions_per_seq < 1:
            raise ValueError(
                f"`max_predictions_per_seq` must be >= 1. Received: {self.max_predictions_per_seq}.")
        segmenter = self.chinese_word_segmenter
        if segmenter and segmenter not in SEGMENTERS:
            raise ValueError(f"`chinese_word_segmenter` must be one of {', '.join(SEGMENTERS)}, or "
                             f"empty for none. Received: {segmenter!r}.")
        if segmenter and not self.do_whole_word_mask:
            # Its words only say which tokens are masked together: without
            # whole-word masking it would change nothing, silently.
            raise ValueError(
                f"--chinese_word_segmenter={segmenter} needs --do_whole_word_mask "
                f"(`chinese_word_segmenter={segmenter!r}` with `do_whole_word_mask=False`): the "
                "segmented words only decide which tokens whole-word masking masks together.")
        if segmenter and self.unmasked:
            # The reader's dynamic masking sees ids only, not the words.
            raise ValueError(
                f"--chinese_word_segmenter={segmenter} cannot be used with --unmasked: unmasked "
                "records are masked by the reader (dynamic masking), one token at a time, "
                "without the segmented words. Leave --unmasked out.")


@dataclasses.dataclass(frozen=True)
class VocabInfo:
    """The ids instance creation needs."""

    cls_id: int
    sep_id: int
    mask_id: int
    vocab_size: int
    is_subword: tuple  # bool per id
    special_ids: frozenset

    @classmethod
    def from_vocab(cls, vocab):
        size = max(vocab.values()) + 1
        is_subword = [False] * size
        for token, index in vocab.items():
            is_subword[index] = token.startswith("##")
        special = frozenset(i for t, i in vocab.items() if t.startswith("[") and t.endswith("]"))
        return cls(vocab["[CLS]"], vocab["[SEP]"], vocab["[MASK]"], size, tuple(is_subword), special)


@dataclasses.dataclass
class Instance:
    token_ids: list
    a_length: int  # tokens of segment A with [CLS] and its [SEP]; the rest is B
    is_random_next: bool
    masked_lm_positions: list
    masked_lm_ids: list

    @property
    def segment_ids(self):
        return [0] * self.a_length + [1] * (len(self.token_ids) - self.a_length)


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    """Trims the longer list (B on ties), from the front or back at random.

    One `rng.random()` per removed token, as the original; the lists are
    cut once at the end instead of one `del` per token.
    """
    bounds = [[0, len(tokens_a)], [0, len(tokens_b)]]  # [start, end) of A and B
    a, b = bounds
    while (a[1] - a[0]) + (b[1] - b[0]) > max_num_tokens:
        trunc = a if a[1] - a[0] > b[1] - b[0] else b
        if rng.random() < 0.5:
            trunc[0] += 1
        else:
            trunc[1] -= 1
    tokens_a[:] = tokens_a[a[0]:a[1]]
    tokens_b[:] = tokens_b[b[0]:b[1]]


def _exact_fast_path(rng):
    """Whether `rng` is a plain `random.Random` whose draws we may inline."""
    return type(rng) is random.Random and (
        random.Random._randbelow is random.Random._randbelow_with_getrandbits)


def _randint(rng, a, b):
    """`rng.randint(a, b)`, same draws and result, ~3x faster.

    CPython's `randint` -> `randrange` -> `_randbelow(b - a + 1)`, inlined
    (instance creation calls it for every chunk and random document).
    """
    if not _exact_fast_path(rng):
        return rng.randint(a, b)
    n = b - a + 1
    k = n.bit_length()
    r = rng.getrandbits(k)
    while r >= n:
        r = rng.getrandbits(k)
    return a + r


def _shuffle(items, rng):
    """`rng.shuffle(items)`, same draws and result, ~2x faster.

    CPython's `Random.shuffle` draws `_randbelow(i + 1)` for i from the end;
    inlined here (the masking shuffle is the hot spot of `original_rng`).
    """
    if not _exact_fast_path(rng):
        rng.shuffle(items)
        return
    getrandbits = rng.getrandbits
    for i in range(len(items) - 1, 0, -1):
        n = i + 1
        k = n.bit_length()
        j = getrandbits(k)
        while j >= n:
            j = getrandbits(k)
        items[i], items[j] = items[j], items[i]


def create_masked_lm_predictions(token_ids, config, vocab, rng):
    """Masks ~`masked_lm_prob` of the tokens, never [CLS] or [SEP].

    Returns `(output_ids, positions, label_ids)`, positions ascending.
    With `config.chinese_word_segmenter`, `token_ids` may hold marked ids
    (`chinese_words.py`); the output holds plain ids.
    """
    candidates = []
    cls_id, sep_id = vocab.cls_id, vocab.sep_id
    if config.chinese_word_segmenter:
        token_ids, continues = split_marks(list(token_ids), vocab.vocab_size)
        for i, token in enumerate(token_ids):
            if token == cls_id or token == sep_id:
                continue
            # A segmented word's later character joins it as a "##" piece does.
            if candidates and (vocab.is_subword[token] or continues[i]):
                candidates[-1].append(i)
            else:
                candidates.append([i])
    elif config.do_whole_word_mask:
        for i, token in enumerate(token_ids):
            if token == cls_id or token == sep_id:
                continue
            if candidates and vocab.is_subword[token]:
                candidates[-1].append(i)
            else:
                candidates.append([i])
    else:  # one-element groups; same draws as the original's [i] lists
        candidates = [(i,) for i, t in enumerate(token_ids) if t != cls_id and t != sep_id]
    _shuffle(candidates, rng)
    output = list(token_ids)
    num_to_predict = min(
        config.max_predictions_per_seq, max(1, int(round(len(token_ids) * config.masked_lm_prob)))
    )
    masked = []
    covered = set()
    for index_set in candidates:
        if len(masked) >= num_to_predict:
            break
        # A whole word that would overshoot the budget is skipped, as the original.
        if len(masked) + len(index_set) > num_to_predict:
            continue
        if any(index in covered for index in index_set):
            continue
        for index in index_set:
            covered.add(index)
            if rng.random() < 0.8:
                replacement = vocab.mask_id
            elif rng.random() < 0.5:
                replacement = token_ids[index]
            else:
                replacement = rng.randint(0, vocab.vocab_size - 1)
                while config.random_token_excludes_special and replacement in vocab.special_ids:
                    replacement = rng.randint(0, vocab.vocab_size - 1)
            output[index] = replacement
            masked.append((index, token_ids[index]))
    masked.sort()
    return output, [i for i, _ in masked], [label for _, label in masked]


def create_instances_from_document(documents, document_index, config, vocab, rng):
    """Instances from one document; random next segments from `documents`."""
    document = documents[document_index]
    max_num_tokens = config.max_seq_length - 3  # [CLS], [SEP], [SEP]
    target_seq_length = max_num_tokens
    if rng.random() < config.short_seq_prob:
        target_seq_length = _randint(rng, 2, max_num_tokens)
    instances = []
    chunk = []
    chunk_length = 0
    i = 0
    while i < len(document):
        segment = document[i]
        chunk.append(segment)
        chunk_length += len(segment)
        if i == len(document) - 1 or chunk_length >= target_seq_length:
            if chunk:
                a_end = 1
                if len(chunk) >= 2:
                    a_end = _randint(rng, 1, len(chunk) - 1)
                tokens_a = list(itertools.chain.from_iterable(chunk[:a_end]))
                tokens_b = []
                if config.exact_nsp:
                    is_random_next = rng.random() < 0.5
                    if not is_random_next and len(chunk) == 1:
                        if len(tokens_a) < 2:  # cannot split one token
                            is_random_next = True
                        else:
                            cut = _randint(rng, 1, len(tokens_a) - 1)
                            tokens_a, tokens_b = tokens_a[:cut], tokens_a[cut:]
                else:
                    is_random_next = len(chunk) == 1 or rng.random() < 0.5
                if is_random_next:
                    tokens_b = _random_next(documents, document_index,
                                            target_seq_length - len(tokens_a), rng)
                    # Segments of the chunk not used go back to be used next.
                    i -= len(chunk) - a_end
                elif not tokens_b:
                    tokens_b = list(itertools.chain.from_iterable(chunk[a_end:]))
                truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
                if tokens_a and tokens_b:
                    token_ids = [vocab.cls_id, *tokens_a, vocab.sep_id, *tokens_b, vocab.sep_id]
                    if config.original_rng and not config.unmasked:
                        output, positions, labels = create_masked_lm_predictions(
                            token_ids, config, vocab, rng)
                    else:
                        output, positions, labels = token_ids, [], []
                    instances.append(
                        Instance(output, len(tokens_a) + 2, is_random_next, positions, labels))
            chunk = []
            chunk_length = 0
        i += 1
    return instances


def _random_next(documents, document_index, target_b_length, rng):
    """Segment B of a "random next" pair: consecutive segments of another
    document (ten draws to avoid this one), from a random one on, until
    `target_b_length` tokens."""
    for _ in range(10):
        random_index = _randint(rng, 0, len(documents) - 1)
        if random_index != document_index:
            break
    random_document = documents[random_index]
    start = _randint(rng, 0, len(random_document) - 1)
    tokens_b = []
    for j in range(start, len(random_document)):
        tokens_b.extend(random_document[j])
        if len(tokens_b) >= target_b_length:
            break
    return tokens_b


def create_instances(documents, config, vocab, dupe_factor, rng):
    """The original `create_training_instances` on already tokenized documents:
    shuffle documents, `dupe_factor` passes over them, shuffle instances."""
    documents = [d for d in documents if d]
    rng.shuffle(documents)
    instances = []
    for _ in range(dupe_factor):
        for index in range(len(documents)):
            instances.extend(create_instances_from_document(documents, index, config, vocab, rng))
    rng.shuffle(instances)
    return instances

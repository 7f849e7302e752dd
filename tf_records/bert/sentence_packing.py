"""RoBERTa's inputs without sentence pairs: FULL-SENTENCES and DOC-SENTENCES.

Liu et al. 2019 (RoBERTa, Sec. 4.2) drop NSP and pack each input with full
sentences taken contiguously:

- FULL-SENTENCES: rows may cross document boundaries; at the end of a
  document the next one follows after an extra separator token.
- DOC-SENTENCES: rows never cross a document; a row near a document's end may
  be shorter.

A row is `[CLS] sentences [SEP]`, all of segment 0, with no NSP label (its
`next_sentence_labels` is 0 and nothing should train on it). A sentence longer
than a row is split over consecutive rows rather than cut: no token is
dropped. Masking is the same as for segment pairs (`masking.py`, or the
original's per-instance draws with `original_rng`).
"""

from tf_records.bert.instances import DOC_SENTENCES
from tf_records.bert.instances import FULL_SENTENCES
from tf_records.bert.instances import Instance
from tf_records.bert.instances import create_masked_lm_predictions


def _pieces(sentence, budget):
    """A sentence as row-sized pieces (one piece unless longer than a row)."""
    return [sentence[i:i + budget] for i in range(0, len(sentence), budget)]


def pack_sentences(documents, budget, cross_documents, separator_id):
    """Yields token lists of at most `budget` tokens, sentences kept whole
    unless one alone is longer than `budget`.

    With `cross_documents`, a document continues the previous one's row after
    `separator_id` (when both fit); otherwise every document starts a row.
    """
    row = []
    for document in documents:
        if row and not cross_documents:
            yield row
            row = []
        continues = bool(row)  # this document continues the previous one's row
        for sentence in document:
            for piece in _pieces(sentence, budget):
                separator = [separator_id] if continues else []
                if len(row) + len(separator) + len(piece) > budget:
                    yield row
                    row, separator = [], []
                row += separator + piece
                continues = False
    if row:
        yield row


def create_packed_instances(documents, config, vocab, dupe_factor, rng):
    """`create_instances` for FULL-SENTENCES / DOC-SENTENCES: shuffle documents,
    `dupe_factor` passes over them, shuffle instances (as the original's
    segment-pair path), each row `[CLS] ... [SEP]`."""
    if config.input_format not in (FULL_SENTENCES, DOC_SENTENCES):
        raise ValueError(f"`input_format` must be {FULL_SENTENCES!r} or {DOC_SENTENCES!r} here. "
                         f"Received: {config.input_format!r}.")
    documents = [d for d in documents if d]
    rng.shuffle(documents)
    cross = config.input_format == FULL_SENTENCES
    instances = []
    for _ in range(dupe_factor):
        for row in pack_sentences(documents, config.max_seq_length - 2, cross, vocab.sep_id):
            token_ids = [vocab.cls_id, *row, vocab.sep_id]
            if config.original_rng and not config.unmasked:
                token_ids, positions, labels = create_masked_lm_predictions(
                    token_ids, config, vocab, rng)
            else:
                positions, labels = [], []
            instances.append(Instance(token_ids, len(token_ids), False, positions, labels))
    rng.shuffle(instances)
    return instances

"""Span-level precision, recall and F1 for tagging, counted as `conlleval`.

`conlleval` (Tjong Kim Sang, version 2004-01-26) is the script the
CoNLL-2000 chunking and CoNLL-2003 NER tasks and the BERT paper's NER table
report. Its numbers depend on small rules, so this is a port of the script's
counting, not a re-derivation:

- a tag splits at its first hyphen into a prefix and a type ("B-PER" ->
  "B", "PER"; "O" -> "O", "");
- `start_of_chunk` / `end_of_chunk` decide where chunks begin and end from
  the previous and current tag: B always starts one, I after O starts one
  (so a stray I-X after O is a chunk, not an error), and a type change
  inside a chunk ends it and starts another;
- a predicted chunk is correct when a gold chunk has the same start, end and
  type (a partial overlap counts as one wrong prediction and one miss);
- a sentence boundary ends every chunk and is not a token;
- token accuracy compares the whole tags, prefix included.

IOB1 (the original CoNLL-2003 files: I- everywhere, B- only between two
adjacent chunks of one type) and BIO/IOB2 (B- on every chunk's first token)
go through the same rules, so both schemes are scored as conlleval scores
them and the same spans in either scheme get the same F1 (token accuracy
still sees the different tags). IOBES is not: conlleval's rules know no S-,
so S-PER S-PER reads as one chunk; convert IOBES to BIO first.

All values are percentages on the 0..100 scale, unrounded (conlleval prints
them with two decimals).
"""

import collections

_BOUNDARY = "-X-"  # conlleval's sentence-boundary first column


def split_tag(tag):
    """`(prefix, type)` of a tag, as conlleval's `/^([^-]*)-(.*)$/`.

    Example:
    >>> split_tag("B-PER"), split_tag("I-NP-X"), split_tag("O")
    (('B', 'PER'), ('I', 'NP-X'), ('O', ''))
    """
    prefix, hyphen, type_ = tag.partition("-")
    if not hyphen:
        return tag, ""
    # conlleval's `$type ? $type : ""` is Perl truthiness: "0" is false too.
    return prefix, type_ if type_ != "0" else ""


def end_of_chunk(prev_prefix, prefix, prev_type, type_):
    """True when a chunk ended between the previous and the current token.

    conlleval's `endOfChunk`, including its rules for the E-, "[" and "]"
    tags of other chunk representations (Tjong Kim Sang and Veenstra, 1999).
    """
    pair = (prev_prefix, prefix)
    if pair in (("B", "B"), ("B", "O"), ("I", "B"), ("I", "O")):
        return True
    if pair in (("E", "E"), ("E", "I"), ("E", "O")):
        return True
    if prev_prefix not in ("O", ".") and prev_type != type_:
        return True
    return prev_prefix in ("[", "]")  # these chunks are one token long


def start_of_chunk(prev_prefix, prefix, prev_type, type_):
    """True when a chunk started between the previous and the current token.

    conlleval's `startOfChunk`: B always starts one; I or E after O starts
    one; a type change on a non-O tag starts one.
    """
    pair = (prev_prefix, prefix)
    if pair in (("B", "B"), ("I", "B"), ("O", "B"), ("O", "I")):
        return True
    if pair in (("E", "E"), ("E", "I"), ("O", "E")):
        return True
    if prefix not in ("O", ".") and prev_type != type_:
        return True
    return prefix in ("[", "]")


def conlleval(gold_sentences, predicted_sentences):
    """Chunk precision, recall, F1 and token accuracy, as conlleval.

    Args:
        gold_sentences: list of lists of str. Gold tags per sentence.
        predicted_sentences: list of lists of str. Predicted tags, the same
            number per sentence.

    Returns:
        dict: "precision", "recall", "f1", "accuracy" (floats, 0..100),
        "num_tokens", "num_gold_chunks", "num_predicted_chunks",
        "num_correct_chunks" (ints), and "per_type": {type: {"precision",
        "recall", "f1", "num_gold_chunks", "num_predicted_chunks",
        "num_correct_chunks"}} for every type seen in gold or prediction,
        sorted by name as conlleval prints them.

    Example:
    >>> metrics = conlleval([["B-PER", "I-PER", "O"]], [["B-PER", "O", "O"]])
    >>> metrics["f1"], metrics["accuracy"]
    (0.0, 66.66666666666667)
    """
    if len(gold_sentences) != len(predicted_sentences):
        raise ValueError(
            f"Got {len(gold_sentences)} gold sentences but {len(predicted_sentences)} "
            "predicted ones; they pair up one to one."
        )
    rows = []
    for index, (gold, predicted) in enumerate(zip(gold_sentences, predicted_sentences)):
        if len(gold) != len(predicted):
            raise ValueError(
                f"Sentence {index} has {len(gold)} gold tags but {len(predicted)} predicted "
                "ones; predict one tag per word."
            )
        rows += [(g, p, False) for g, p in zip(gold, predicted)]
        rows.append(("O", "O", True))  # the blank line conlleval reads between sentences
    return _count(rows)


def conlleval_file(path, encoding="utf-8"):
    """Scores a file in conlleval's input format, as the script would.

    Lines are `... gold predicted` (the last two fields; the columns before
    are ignored); a blank line, or a line whose first field is "-X-", is a
    sentence boundary. `training.tasks.conll.write_predictions` writes this format.

    Args:
        path: str. The file.
        encoding: str. Its text encoding.

    Returns:
        dict: as `conlleval`.
    """
    rows = []
    expected = None
    with open(path, encoding=encoding) as f:
        for number, line in enumerate(f, start=1):
            fields = line.split()
            if fields and expected is None:
                expected = len(fields)
            elif fields and len(fields) != expected:
                # conlleval stops here too ("unexpected number of features").
                raise ValueError(
                    f"{path}, line {number}: {len(fields)} fields where the first line "
                    f"has {expected}: {line.rstrip()!r}. Every line needs the same columns."
                )
            if not fields or fields[0] == _BOUNDARY:
                rows.append(("O", "O", True))
            elif len(fields) < 2:
                raise ValueError(
                    f"{path}, line {number}: {line.rstrip()!r} has no gold and predicted "
                    "tag; the last two fields must be `gold predicted`."
                )
            else:
                rows.append((fields[-2], fields[-1], False))
    return _count(rows)


def _count(rows):
    """conlleval's main loop over `(gold_tag, predicted_tag, is_boundary)`."""
    correct_chunks = collections.Counter()
    gold_chunks = collections.Counter()
    predicted_chunks = collections.Counter()
    correct_tags = num_tokens = 0
    in_correct = False  # the current gold and predicted chunks agree so far
    last_gold, last_gold_type = "O", ""
    last_pred, last_pred_type = "O", ""
    for gold_tag, predicted_tag, is_boundary in rows:
        gold, gold_type = split_tag(gold_tag)
        pred, pred_type = split_tag(predicted_tag)
        if is_boundary:
            pred = "O"  # conlleval: a boundary is always outside any chunk
        gold_end = end_of_chunk(last_gold, gold, last_gold_type, gold_type)
        pred_end = end_of_chunk(last_pred, pred, last_pred_type, pred_type)
        gold_start = start_of_chunk(last_gold, gold, last_gold_type, gold_type)
        pred_start = start_of_chunk(last_pred, pred, last_pred_type, pred_type)

        if in_correct:
            if gold_end and pred_end and last_pred_type == last_gold_type:
                in_correct = False
                correct_chunks[last_gold_type] += 1
            elif gold_end != pred_end or pred_type != gold_type:
                in_correct = False
        if gold_start and pred_start and pred_type == gold_type:
            in_correct = True
        if gold_start:
            gold_chunks[gold_type] += 1
        if pred_start:
            predicted_chunks[pred_type] += 1
        if not is_boundary:
            correct_tags += (gold, gold_type) == (pred, pred_type)
            num_tokens += 1
        last_gold, last_gold_type = gold, gold_type
        last_pred, last_pred_type = pred, pred_type
    if in_correct:
        correct_chunks[last_gold_type] += 1

    metrics = _scores(
        sum(correct_chunks.values()), sum(gold_chunks.values()), sum(predicted_chunks.values())
    )
    metrics["accuracy"] = 100 * correct_tags / num_tokens if num_tokens else 0.0
    metrics["num_tokens"] = num_tokens
    metrics["per_type"] = {
        type_: _scores(correct_chunks[type_], gold_chunks[type_], predicted_chunks[type_])
        for type_ in sorted(set(gold_chunks) | set(predicted_chunks))
    }
    return metrics


def _scores(correct, gold, predicted):
    """conlleval's formulas: 0 where a denominator is 0."""
    precision = 100 * correct / predicted if predicted else 0.0
    recall = 100 * correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "num_gold_chunks": gold,
        "num_predicted_chunks": predicted,
        "num_correct_chunks": correct,
    }

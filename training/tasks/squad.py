"""SQuAD v1.1 / v2.0 for fine-tuning, as the original `run_squad.py`.

Over 400 lines: the steps of the original `run_squad.py` listed below, kept
in one file in its order.

1. `read_squad_examples`: official JSON -> `SquadExample`s; the context is
   split on whitespace into words, and character offsets map to words.
2. `convert_examples_to_features`: `[CLS] question [SEP] document [SEP]`
   windows over long documents (`training.tasks.windows`); each document token
   keeps its word and whether this window gives it the most context.
   Training labels are the answer's token positions, or 0/0 ([CLS]) when
   the window misses it or the question is unanswerable (v2).
3. `decode_predictions`: the best valid span over a question's windows,
   projected back onto the original text (`get_final_text`); for v2 "" when
   the null score beats it by more than a threshold (tune it on a dev set
   with `squad_metrics.search_null_threshold`).

Reference: Devlin et al. 2018, "BERT", section 4.2-4.3;
google-research/bert `run_squad.py`.

Example:
>>> examples, skipped = read_squad_examples("train-v1.1.json", is_training=True)
>>> features = convert_examples_to_features(examples, tokenizer, is_training=True)
>>> model.fit(features.x, features.y)  # outputs "start_logits", "end_logits"
"""

import dataclasses
import functools
import json
import logging
import math
import os

import numpy as np

from keras_bert_impl.base.json_files import write_json_atomic
from keras_bert_impl.tokenizers.basic_tokenizer import BasicTokenizer
from training.tasks.bad_rows import BadRowError
from training.tasks.windows import is_max_context
from training.tasks.windows import windows

# N=features, S=max_seq_length
logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One question on one context; positions index `doc_tokens` (words).

    `start_position`/`end_position` are None outside training and -1 for
    an unanswerable (v2) training question.
    """

    qas_id: str
    question_text: str
    doc_tokens: list
    orig_answer_text: str = None
    start_position: int = None
    end_position: int = None
    is_impossible: bool = False


def _split_words(context):
    """Whitespace-separated words, and each character's word index (a space
    belongs to the word before it; -1 before the first word)."""
    words, char_to_word = [], []
    prev_is_whitespace = True
    for char in context:
        # The original's whitespace: U+202F (narrow no-break space) occurs in SQuAD.
        if char in (" ", "\t", "\r", "\n") or ord(char) == 0x202F:
            prev_is_whitespace = True
        else:
            if prev_is_whitespace:
                words.append(char)
            else:
                words[-1] += char
            prev_is_whitespace = False
        char_to_word.append(len(words) - 1)
    return words, char_to_word


def _field(record, key, path, where):
    if not isinstance(record, dict) or key not in record:
        raise ValueError(
            f"{path}: {where} has no {key!r} field. SQuAD JSON nests "
            "data[].paragraphs[].{context, qas[].{id, question, answers[].{text, answer_start}}}.")
    return record[key]


def load_squad_json(path):
    """The list under "data" of an official SQuAD file (for the metrics)."""
    try:
        with open(path, encoding="utf-8") as f:
            content = json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not valid JSON: {e}.") from None
    data = _field(content, "data", path, "the file")
    if not isinstance(data, list):
        raise ValueError(f"{path}: 'data' must be a list of articles. Received: {type(data).__name__}.")
    return data


def read_squad_examples(path, is_training, version_2_with_negative=False, skip_bad_answers=False):
    """Reads an official SQuAD JSON file, as the original's reader.

    Args:
        path: str. `train-v1.1.json`, `dev-v2.0.json`, ...
        is_training: bool. Read the answer (exactly one per answerable
            question) and locate it; evaluation ignores answers here.
        version_2_with_negative: bool. Read v2's `is_impossible` (training).
        skip_bad_answers: bool. Skip and count training answers that are
            not at their `answer_start` (the original skips them with a
            warning); False raises `ValueError` naming the question.

    Returns:
        `(examples, num_skipped)`: a list of `SquadExample`, and how many
        questions were skipped for a bad answer offset.
    """
    examples, num_skipped = [], 0
    for a, entry in enumerate(load_squad_json(path)):
        for p, paragraph in enumerate(_field(entry, "paragraphs", path, f"data[{a}]")):
            where = f"data[{a}].paragraphs[{p}]"
            context = _field(paragraph, "context", path, where)
            doc_tokens, char_to_word = _split_words(context)
            for q, qa in enumerate(_field(paragraph, "qas", path, where)):
                qid = _field(qa, "id", path, f"{where}.qas[{q}]")
                where_qa = f"{where}.qas[{q}] (id {qid!r})"
                question = _field(qa, "question", path, where_qa)
                if not is_training:
                    examples.append(SquadExample(qid, question, doc_tokens))
                    continue
                example = _training_example(path, qa, where_qa, SquadExample(
                    qid, question, doc_tokens), context, char_to_word, version_2_with_negative,
                    skip_bad_answers)
                if example is None:
                    num_skipped += 1
                else:
                    examples.append(example)
    if num_skipped:
        logger.warning("%s: skipped %d question(s) whose answer is not at its offset.", path, num_skipped)
    return examples, num_skipped


def _training_example(path, qa, where_qa, question, context, char_to_word,
                      version_2_with_negative, skip_bad_answers):
    """`question` (a `SquadExample` without its answer) with the answer of
    `qa` located in its words; None when `skip_bad_answers` skips it (the
    answer is not at its `answer_start`)."""
    qid, doc_tokens = question.qas_id, question.doc_tokens
    is_impossible = False
    if version_2_with_negative:
        is_impossible = bool(_field(qa, "is_impossible", path, where_qa))
    if is_impossible:
        return dataclasses.replace(question, orig_answer_text="", start_position=-1,
                                   end_position=-1, is_impossible=True)
    answers = _field(qa, "answers", path, where_qa)
    if len(answers) != 1:
        raise ValueError(
            f"{path}: question {qid!r} has {len(answers)} answers; training needs "
            "exactly one per answerable question (as the original).")
    text = _field(answers[0], "text", path, f"{where_qa}.answers[0]")
    offset = _field(answers[0], "answer_start", path, f"{where_qa}.answers[0]")
    cleaned = " ".join(text.split())
    start = end = -1
    if isinstance(offset, int) and text and 0 <= offset <= len(context) - len(text):
        start, end = char_to_word[offset], char_to_word[offset + len(text) - 1]
    actual = " ".join(doc_tokens[start : end + 1]) if start >= 0 else ""
    # Only answers whose text is recoverable from the words at
    # their offsets (usually odd Unicode or a shifted offset).
    if not cleaned or cleaned not in actual:
        if not skip_bad_answers:
            raise BadRowError(
                f"{path}: question {qid!r}: the answer {cleaned!r} is not in the "
                f"context at answer_start={offset} (the words there read {actual!r}). "
                "Fix the offset.", "skip_bad_answers", "questions")
        return None
    return dataclasses.replace(question, orig_answer_text=text, start_position=start,
                               end_position=end)


@dataclasses.dataclass(frozen=True)
class SquadFeatures:
    """Model inputs for N windows, and what decoding needs to read them.

    Attributes:
        x: dict of int32 `(N, S)` arrays `input_word_ids`, `input_mask`,
            `input_type_ids`.
        y: dict of int32 `(N,)` arrays `start_logits`, `end_logits` (the
            gold positions, keyed like the model's outputs so that
            `model.fit(x, y)` lines them up); None outside training.
        example_index: int32 `(N,)`. Which example each window reads.
        doc_span_index: int32 `(N,)`. Which window of its example it is.
        tokens: list of N token lists (unpadded).
        token_to_orig_map: list of N dicts, input position -> word index.
        token_is_max_context: list of N dicts, input position -> bool.
    """

    x: dict
    y: dict
    example_index: np.ndarray
    doc_span_index: np.ndarray
    tokens: list
    token_to_orig_map: list
    token_is_max_context: list

    @property
    def start_positions(self):
        return None if self.y is None else self.y["start_logits"]

    @property
    def end_positions(self):
        return None if self.y is None else self.y["end_logits"]

    def __len__(self):
        return len(self.tokens)


def _improve_answer_span(doc_tokens, start, end, tokenizer, orig_answer_text):
    """The first sub-span whose wordpieces spell the tokenized answer.

    Offsets give whole words: for "(1895-1943)." and answer "1895" this
    finds the "1895" piece. No match (answer "Japan" in "Japanese") keeps
    the words' span, as the original.
    """
    answer = " ".join(tokenizer.tokenize(orig_answer_text))
    for new_start in range(start, end + 1):
        for new_end in range(end, new_start - 1, -1):
            if " ".join(doc_tokens[new_start : new_end + 1]) == answer:
                return new_start, new_end
    return start, end


def convert_examples_to_features(
    examples, tokenizer, max_seq_length=384, doc_stride=128, max_query_length=64, is_training=False
):
    """Windows of `[CLS] question [SEP] document [SEP]`, as the original.

    Args:
        examples: list of `SquadExample`.
        tokenizer: `BertTokenizer` (its vocabulary's [CLS], [SEP], [PAD]).
        max_seq_length: int. Input length with the special tokens.
        doc_stride: int. Step between window starts, in tokens.
        max_query_length: int. Longer questions keep their first tokens.
        is_training: bool. Also make the gold positions `y`.

    Returns:
        `SquadFeatures`, one row per window, examples in order.
    """
    rows = []  # per window: example, window, tokens, segment A length, maps, start, end
    for example_index, example in enumerate(examples):
        query = tokenizer.tokenize(example.question_text)[:max_query_length]
        tok_to_orig, orig_to_tok, doc_pieces = _doc_pieces(example, tokenizer)
        tok_start = tok_end = -1
        if is_training and not example.is_impossible:
            tok_start, tok_end = _improve_answer_span(
                doc_pieces, *answer_pieces(example, orig_to_tok, len(doc_pieces)), tokenizer,
                example.orig_answer_text)

        max_doc_tokens = max_seq_length - len(query) - 3  # [CLS], [SEP], [SEP]
        if max_doc_tokens < 1:
            raise ValueError(
                f"max_seq_length={max_seq_length} leaves no room for the document after a "
                f"{len(query)}-token question and 3 special tokens. Raise `max_seq_length` "
                f"or lower `max_query_length` (now {max_query_length}).")
        spans = windows(len(doc_pieces), max_doc_tokens, doc_stride)
        doc_offset = len(query) + 2  # the document starts after [CLS] question [SEP]
        for span_index, span in enumerate(spans):
            tokens = ["[CLS]", *query, "[SEP]", *doc_pieces[span.start : span.end], "[SEP]"]
            to_orig = {doc_offset + p - span.start: tok_to_orig[p] for p in range(span.start, span.end)}
            max_context = {doc_offset + p - span.start: is_max_context(spans, span_index, p)
                           for p in range(span.start, span.end)}
            start = end = 0  # [CLS]: unanswerable, or the answer is not in this window
            if is_training and not example.is_impossible and span.start <= tok_start and tok_end < span.end:
                start, end = tok_start - span.start + doc_offset, tok_end - span.start + doc_offset
            rows.append((example_index, span_index, tokens, doc_offset, to_orig, max_context, start, end))
    return _features(rows, tokenizer, max_seq_length, is_training)


def _doc_pieces(example, tokenizer):
    """`(tok_to_orig, orig_to_tok, pieces)`: the document's wordpieces, each
    piece's word, and each word's first piece."""
    tok_to_orig, orig_to_tok, doc_pieces = [], [], []
    for i, word in enumerate(example.doc_tokens):
        orig_to_tok.append(len(doc_pieces))
        for piece in tokenizer.tokenize(word):
            tok_to_orig.append(i)
            doc_pieces.append(piece)
    return tok_to_orig, orig_to_tok, doc_pieces


def answer_pieces(example, word_start, num_pieces):
    """A training answer's pieces `(first, last)`: its first word's first
    piece to its last word's last one (`word_start`: each word's first
    piece), before `_improve_answer_span` narrows them."""
    start = word_start[example.start_position]
    if example.end_position < len(example.doc_tokens) - 1:
        end = word_start[example.end_position + 1] - 1
    else:
        end = num_pieces - 1
    return start, end


def _features(rows, tokenizer, max_seq_length, is_training):
    """`SquadFeatures` of the windows' `rows`, padded to `max_seq_length`."""
    x = {name: np.zeros((len(rows), max_seq_length), np.int32)  # (N, S)
         for name in ("input_word_ids", "input_mask", "input_type_ids")}
    x["input_word_ids"][:] = tokenizer.pad_token_id
    for row, (_, _, tokens, doc_offset, *_) in enumerate(rows):
        x["input_word_ids"][row, : len(tokens)] = tokenizer.convert_tokens_to_ids(tokens)
        x["input_mask"][row, : len(tokens)] = 1
        x["input_type_ids"][row, doc_offset : len(tokens)] = 1
    example_index, span_index, tokens, _, to_orig, max_context, starts, ends = (
        list(column) for column in (zip(*rows) if rows else [()] * 8))
    y = None
    if is_training:
        y = {"start_logits": np.array(starts, np.int32), "end_logits": np.array(ends, np.int32)}
    return SquadFeatures(
        x=x, y=y, example_index=np.array(example_index, np.int32),
        doc_span_index=np.array(span_index, np.int32), tokens=tokens,
        token_to_orig_map=to_orig, token_is_max_context=max_context)


def _best_indexes(logits, n_best_size):
    # Highest first; ties keep position order, as the original's stable sort.
    return np.argsort(-logits, kind="stable")[:n_best_size].tolist()


def _softmax(scores):
    top = max(scores)
    exps = [math.exp(score - top) for score in scores]
    return [x / sum(exps) for x in exps]


def _strip_spaces(text):
    """`text` without spaces, and each kept character's index in `text`."""
    kept = [(i, char) for i, char in enumerate(text) if char != " "]
    return "".join(char for _, char in kept), [i for i, _ in kept]


def get_final_text(pred_text, orig_text, do_lower_case=True):
    """Projects a detokenized prediction back onto the original words.

    `orig_text` is the whole words the predicted tokens came from
    ("Steve Smith's"); `pred_text` is normalized ("steve smith"). Both are
    aligned character by character with spaces removed; the answer is the
    original spelling of the matched part ("Steve Smith"). When that fails
    (lengths differ after basic tokenization, say accents were stripped)
    the whole `orig_text` is returned, as the original.
    """
    tok_text = " ".join(BasicTokenizer(do_lower_case=do_lower_case).tokenize(orig_text))
    start = tok_text.find(pred_text)
    if start == -1:
        return orig_text
    end = start + len(pred_text) - 1
    orig_ns_text, orig_ns_to_s = _strip_spaces(orig_text)
    tok_ns_text, tok_ns_to_s = _strip_spaces(tok_text)
    if len(orig_ns_text) != len(tok_ns_text):
        return orig_text
    tok_s_to_ns = {s: ns for ns, s in enumerate(tok_ns_to_s)}
    if start not in tok_s_to_ns or end not in tok_s_to_ns:
        return orig_text
    return orig_text[orig_ns_to_s[tok_s_to_ns[start]] : orig_ns_to_s[tok_s_to_ns[end]] + 1]


def decode_predictions(examples, features, start_logits, end_logits, n_best_size=20,
                       max_answer_length=30, do_lower_case=True, version_2_with_negative=False,
                       null_score_diff_threshold=0.0):
    """Answer text per question from the model's logits, as `write_predictions`.

    Over all windows of a question: the `n_best_size` best starts and ends
    of each window, kept when both lie in the document, the start is a
    max-context token, and `start <= end < start + max_answer_length`;
    ranked by start + end logit. v2 adds the null answer, scored with the
    [CLS] logits of the window where that score is lowest (the window most
    sure an answer exists), and predicts "" when
    `null score - best span score > null_score_diff_threshold`.

    Args:
        examples: list of `SquadExample`, as given to the features.
        features: `SquadFeatures` of `examples`.
        start_logits, end_logits: float `(N, S)`, row i for window i.
        n_best_size: int. Candidates per window and answers kept per question.
        max_answer_length: int. Longest answer, in tokens.
        do_lower_case: bool. As the tokenizer (for `get_final_text`).
        version_2_with_negative: bool. Consider "no answer".
        null_score_diff_threshold: float. See above (v2).

    Returns:
        `(predictions, nbest, null_odds)`: question id -> text; question id
        -> list of {"text", "probability", "start_logit", "end_logit"},
        best first; question id -> null score minus best span score (v2
        only, else empty).
    """

    def span_text(example, row, i, j):  # the wordpieces' text on the original words
        tok_text = " ".join(features.tokens[row][i : j + 1])
        tok_text = " ".join(tok_text.replace(" ##", "").replace("##", "").split())
        to_orig = features.token_to_orig_map[row]
        orig_text = " ".join(example.doc_tokens[to_orig[i] : to_orig[j] + 1])
        return get_final_text(tok_text, orig_text, do_lower_case)

    return search_answers(examples, features, start_logits, end_logits, span_text, 0,
                          n_best_size, max_answer_length, version_2_with_negative,
                          null_score_diff_threshold)


def search_answers(examples, features, start_logits, end_logits, span_text, null_position,
                   n_best_size, max_answer_length, version_2_with_negative,
                   null_score_diff_threshold):
    """The original `write_predictions`' n-best search over any model's
    windows: `(predictions, nbest, null_odds)`, as `decode_predictions`.

    `features` has `example_index`, `token_to_orig_map` and
    `token_is_max_context`; `span_text(example, row, i, j)` is the answer
    text of positions `i..j` of window `row`; `null_position` is where a
    window scores "no answer" (0: BERT's [CLS]; -1: XLNet's <cls>, the last).
    """
    start_logits = np.asarray(start_logits, np.float64)  # (N, S); the original sums Python floats
    end_logits = np.asarray(end_logits, np.float64)  # (N, S)
    if start_logits.ndim != 2 or start_logits.shape != end_logits.shape or len(start_logits) != len(features):
        raise ValueError(
            f"Expected start and end logits of shape ({len(features)}, max_seq_length), one row "
            f"per feature. Received: {start_logits.shape} and {end_logits.shape}.")
    if null_position < 0:
        null_position += start_logits.shape[1]
    rows_of = {}
    for row, example_index in enumerate(features.example_index.tolist()):
        rows_of.setdefault(example_index, []).append(row)
    predictions, nbest_json, null_odds = {}, {}, {}
    for example_index, example in enumerate(examples):
        if example_index not in rows_of:
            raise ValueError(f"Example {example_index} ({example.qas_id!r}) has no features; pass the "
                             "examples the features were made from.")
        prelim, null = _candidates(rows_of[example_index], features, start_logits, end_logits,
                                   null_position, n_best_size, max_answer_length,
                                   version_2_with_negative)
        nbest = _n_best(prelim, functools.partial(span_text, example), null_position, null,
                        n_best_size, version_2_with_negative)
        probabilities = _softmax([s + e for _, s, e in nbest])
        nbest_json[example.qas_id] = [
            {"text": text, "probability": p, "start_logit": s, "end_logit": e}
            for (text, s, e), p in zip(nbest, probabilities)]
        if not version_2_with_negative:
            predictions[example.qas_id] = nbest[0][0]
            continue
        best_text, best_start, best_end = next(entry for entry in nbest if entry[0])
        score_diff = float(null[0]) - best_start - best_end
        null_odds[example.qas_id] = score_diff
        predictions[example.qas_id] = "" if score_diff > null_score_diff_threshold else best_text
    return predictions, nbest_json, null_odds


def _candidates(rows, features, start_logits, end_logits, null_position, n_best_size,
                max_answer_length, version_2_with_negative):
    """A question's candidate answers over its windows `rows`, best first:
    `[(row, start, end, start logit, end logit)]`; v2 adds the null answer,
    scored in the window where that score is lowest (the window most sure an
    answer exists). Also returns that null `(score, row, start logit, end
    logit)`, None outside v2."""
    prelim = []
    null = None
    for row in rows:
        starts, ends = start_logits[row], end_logits[row]
        at = null_position
        if version_2_with_negative and (null is None or starts[at] + ends[at] < null[0]):
            null = (starts[at] + ends[at], row, starts[at], ends[at])
        to_orig = features.token_to_orig_map[row]
        max_context = features.token_is_max_context[row]
        for i in _best_indexes(starts, n_best_size):
            for j in _best_indexes(ends, n_best_size):
                if i not in to_orig or j not in to_orig or not max_context.get(i, False):
                    continue  # a question/special/padding token, or seen better elsewhere
                if j < i or j - i + 1 > max_answer_length:
                    continue
                prelim.append((row, i, j, starts[i], ends[j]))
    if version_2_with_negative:
        prelim.append((null[1], null_position, null_position, null[2], null[3]))
    prelim.sort(key=lambda p: p[3] + p[4], reverse=True)
    return prelim, null


def _n_best(prelim, span_text, null_position, null, n_best_size, version_2_with_negative):
    """The `n_best_size` best distinct answers `(text, start logit, end logit)`
    of the ranked candidates `prelim`; v2 keeps "" among them."""
    nbest, seen = [], set()
    for row, i, j, start_logit, end_logit in prelim:
        if len(nbest) >= n_best_size:
            break
        text = ""
        if i != null_position:  # a span, not the null answer
            text = span_text(row, i, j)
            if text in seen:
                continue
        seen.add(text)
        nbest.append((text, float(start_logit), float(end_logit)))
    if version_2_with_negative and "" not in seen:
        nbest.append(("", float(null[2]), float(null[3])))
    if not any(text for text, _, _ in nbest):
        # No valid span at all (rare): a placeholder, as the original
        # (v1) and Hugging Face's port (v2), so every question is answered.
        nbest.append(("empty", 0.0, 0.0))
    return nbest


def write_predictions_json(path, predictions):
    """Writes a JSON dict (predictions, n-best, null odds) atomically:
    a temporary file in the same folder, then `os.replace`, so a crash
    never leaves a half-written file for the evaluation script."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_json_atomic(path, predictions)


"""Three small fine-tuning tasks made offline from the default corpus, for
the miniature of the BERT paper's Table 5 (`training.ablations`).

No GLUE or SQuAD data can be downloaded here, so each kind of task in
Table 5 gets a stand-in made from the pretraining corpus (the standard
library's docstrings and pydoc topics), in the official file layout that
`training.finetune` reads as it is:

- `word_order/` (single sentence, CoLA layout, `--task=glue/cola`): a
  sentence as written (label 1) or with two of its words swapped (label
  0), as `training.word_order_task`. A unigram bag of words cannot beat
  chance by construction.
- `sentence_order/` (sentence pair, RTE layout, `--task=glue/rte`): two
  consecutive sentences of a document, in the document's order
  ("entailment") or swapped ("not_entailment"). Both orders hold the same
  words, so the pair's bag of words cannot decide it, and one sentence
  alone only hints (a summary-like sentence tends to come first): the
  model has to read how the second follows on from the first (ALBERT's
  sentence-order prediction, as a fine-tuning task). BERT's NSP
  pretraining contrasts a true next sentence with a random one, never a
  swapped one. Not in MRPC's layout: GPT reads MRPC pairs in both orders
  (its similarity transformation), which would make order invisible.
- `span_qa/` (span extraction, SQuAD v1.1 JSON, `--task=squad`): a
  paragraph of up to four consecutive sentences; a question made from one
  of them by replacing a span of one to three words (each occurring once
  in the paragraph) with "what"; the answer is that span, at its exact
  character offset in the paragraph. Finding it means matching the words
  on both sides of the gap, which a left-to-right encoder cannot see at the
  answer's position.

Dev comes from the documents the default corpus holds out of pretraining
(`training.default_corpus.write_default_corpus`, 5%), train from the
others, so no dev text was seen in pretraining. Beside the files,
`tasks.json` records the sizes and the trivial baselines: the majority
class (accuracy) for the two classification tasks, and for span QA the
official F1 of always answering the paragraph's first words; and for the
classification tasks the dev accuracy of logistic regression on word
unigrams + bigrams (each segment's words apart), the shortcut a model must
beat to show it read more than word pairs.

    python -m training.ablation_tasks --output_dir=/tmp/ablation_tasks
"""

import hashlib
import json
import os
import random
import re

from absl import flags

from training import console
from training.default_corpus import default_documents

HELDOUT_PERCENT = 5  # training.default_corpus.write_default_corpus's default
TASK_NAMES = ("word_order", "sentence_order", "span_qa")
MIN_WORDS, MAX_WORDS = 6, 30  # a sentence for word order and questions
PAIR_MIN_WORDS, PAIR_MAX_WORDS = 4, 30  # each sentence of a pair
PARAGRAPH_SENTENCES = 4
MAX_ANSWER_WORDS = 3
QUESTIONS_PER_PARAGRAPH = 3
_ANSWER_WORD = re.compile(r"^([\"'(`]*)([A-Za-z][A-Za-z0-9_]{2,})([\"'),.:;`]*)$")
_STOPWORDS = frozenset("""
    a an the and or but if then else when while for from with without into onto of off on in
    at by to as is are was were be been being has have had do does did not no nor so than that
    this these those there here it its they them their he she his her we our you your which who
    whom whose what where why how all any each every some such can could may might must shall
    should will would also only other more most same very just one two both either neither
    """.split())


def _clean(sentence):
    return " ".join(sentence.split())


def split_documents():
    """`{"train": [...], "dev": [...]}` of the default corpus's documents
    (lists of sentences); dev is exactly what pretraining holds out."""
    sides = {"train": [], "dev": []}
    for sentences in default_documents():
        # The same bucket as write_default_corpus gives the document.
        digest = hashlib.sha256("\n".join(sentences).encode()).hexdigest()
        side = "dev" if int(digest, 16) % 100 < HELDOUT_PERCENT else "train"
        sides[side].append([_clean(s) for s in sentences if "\t" not in s])
    return sides


def _take(items, count, rng, what, side):
    if len(items) < count:
        raise ValueError(f"Only {len(items)} usable {side} {what} in the default corpus; asked "
                         f"for {count}. Ask for fewer.")
    return rng.sample(items, count)


def _swap_two_words(sentence, rng):
    words = sentence.split()
    while True:
        i, j = sorted(rng.sample(range(len(words)), 2))
        if words[i] != words[j]:
            break
    words[i], words[j] = words[j], words[i]
    return " ".join(words)


def word_order_rows(documents, count, rng, side="train"):
    """`[(label, sentence)]`: half as written (1), half with two words swapped (0)."""
    seen, sentences = set(), []
    for document in documents:
        for sentence in document:
            words = sentence.split()
            if MIN_WORDS <= len(words) <= MAX_WORDS and len(set(words)) > 1 and (
                    sentence not in seen):
                seen.add(sentence)
                sentences.append(sentence)
    chosen = _take(sentences, count, rng, "sentences", side)
    rows = [(1, s) if k % 2 == 0 else (0, _swap_two_words(s, rng)) for k, s in enumerate(chosen)]
    rng.shuffle(rows)
    return rows


def sentence_order_rows(documents, count, rng, side="train"):
    """`[(label, first, second)]`: consecutive sentences in order (1) or swapped (0)."""
    pairs = []
    for document in documents:
        for a, b in zip(document, document[1:]):
            if a != b and all(PAIR_MIN_WORDS <= len(s.split()) <= PAIR_MAX_WORDS
                              for s in (a, b)):
                pairs.append((a, b))
    chosen = _take(pairs, count, rng, "sentence pairs", side)
    rows = [(1, a, b) if k % 2 == 0 else (0, b, a) for k, (a, b) in enumerate(chosen)]
    rng.shuffle(rows)
    return rows


def _answer_spans(words, context_words):
    """`(first, last, text offset in the first word, text)` candidates: runs
    of 1..3 content words, each once in the paragraph, punctuation outside."""
    counts = {}
    for word in context_words:
        match = _ANSWER_WORD.match(word)
        key = (match.group(2) if match else word).lower()
        counts[key] = counts.get(key, 0) + 1
    ok = []
    for word in words:
        match = _ANSWER_WORD.match(word)
        ok.append(bool(match) and match.group(2).lower() not in _STOPWORDS
                  and counts.get(match.group(2).lower()) == 1)
    spans = []
    for first in range(len(words)):
        for last in range(first, min(first + MAX_ANSWER_WORDS, len(words))):
            match = _ANSWER_WORD.match(words[last]) if ok[last] else None
            # Punctuation may stand before the first word and after the last only.
            if not match or (last > first and match.group(1)):
                break
            cores = [_ANSWER_WORD.match(w).group(2) for w in words[first:last + 1]]
            spans.append((first, last, len(_ANSWER_WORD.match(words[first]).group(1)),
                          " ".join(cores)))
            if match.group(3):
                break
    return spans


def _question(words, first, last):
    """The sentence with `words[first..last]` replaced by "what", ending in "?"."""
    head, tail = _ANSWER_WORD.match(words[first]), _ANSWER_WORD.match(words[last])
    asked = words[:first] + [head.group(1) + "what" + tail.group(3)] + words[last + 1:]
    return " ".join(asked).rstrip(" .:;,!?") + "?"


def span_qa_articles(documents, count, rng, side="train", prefix="q"):
    """SQuAD v1.1 `data` with `count` questions (one answer each).

    Paragraphs are runs of up to `PARAGRAPH_SENTENCES` sentences; up to
    `QUESTIONS_PER_PARAGRAPH` questions each, from different sentences.
    """
    candidates = []  # (document, paragraph, questions)
    for d, document in enumerate(documents):
        for p in range(0, len(document), PARAGRAPH_SENTENCES):
            sentences = document[p:p + PARAGRAPH_SENTENCES]
            context = " ".join(sentences)
            context_words = context.split()
            offsets, start = [], 0
            for sentence in sentences:
                offsets.append(start)
                start += len(sentence) + 1
            questions = []
            for sentence, offset in zip(sentences, offsets):
                words = sentence.split()
                if not MIN_WORDS <= len(words) <= MAX_WORDS:
                    continue
                spans = _answer_spans(words, context_words)
                if not spans:
                    continue
                first, last, inner, text = rng.choice(spans)
                answer_start = offset + sum(len(w) + 1 for w in words[:first]) + inner
                assert context[answer_start:answer_start + len(text)] == text  # by construction
                questions.append((_question(words, first, last), text, answer_start))
            if questions:
                rng.shuffle(questions)
                candidates.append((d, context, questions[:QUESTIONS_PER_PARAGRAPH]))
    rng.shuffle(candidates)
    articles, total = {}, 0
    for d, context, questions in candidates:
        if total >= count:
            break
        questions = questions[:count - total]
        qas = [{"id": f"{prefix}{total + k}", "question": question,
                "answers": [{"text": text, "answer_start": answer_start}]}
               for k, (question, text, answer_start) in enumerate(questions)]
        total += len(qas)
        articles.setdefault(d, []).append({"context": context, "qas": qas})
    if total < count:
        raise ValueError(f"Only {total} usable {side} questions in the default corpus; asked for "
                         f"{count}. Ask for fewer.")
    return [{"title": f"{side}-{d}", "paragraphs": paragraphs}
            for d, paragraphs in sorted(articles.items())]


def first_words_f1(data, num_words):
    """Official SQuAD v1.1 F1 and EM of always answering the context's first words."""
    from tasks.squad_metrics import evaluate_v1

    predictions = {qa["id"]: " ".join(p["context"].split()[:num_words])
                   for article in data for p in article["paragraphs"] for qa in p["qas"]}
    return evaluate_v1(data, predictions)


def bag_of_words_accuracy(task):
    """Dev accuracy of logistic regression (C=1) on lowercased word unigrams +
    bigrams; `task` is `{"train": [(label, text)], "dev": [...]}`.

    `training.word_order_task` picks C by cross-validation; one fit is
    enough for a reference row here and takes a second, not a minute.
    """
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

    vectorizer = CountVectorizer(ngram_range=(1, 2), token_pattern=r"\S+", lowercase=True)
    train_x = vectorizer.fit_transform([text for _, text in task["train"]])
    classifier = LogisticRegression(C=1.0, max_iter=2000)
    classifier.fit(train_x, [label for label, _ in task["train"]])
    dev_x = vectorizer.transform([text for _, text in task["dev"]])
    return float(classifier.score(dev_x, [label for label, _ in task["dev"]]))


def _tagged(sentence, segment):
    """Words marked with their segment, so a bag of words tells A's from B's."""
    return " ".join(f"{segment}:{word}" for word in sentence.split())


def _majority_accuracy(train_labels, dev_labels):
    majority = max(set(train_labels), key=lambda label: (train_labels.count(label), label))
    return sum(label == majority for label in dev_labels) / len(dev_labels)


def _write(path, text):
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def write_ablation_tasks(folder, num_train=2000, num_dev=400, seed=0):
    """Writes the three tasks under `folder`; returns the `tasks.json` record.

    Already there with the same sizes and seed: read, not rewritten.
    """
    manifest_path = os.path.join(folder, "tasks.json")
    settings = {"num_train": num_train, "num_dev": num_dev, "seed": seed}
    if os.path.exists(manifest_path):
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
        if manifest.get("settings") == settings:
            return manifest
    documents = split_documents()
    rng = random.Random(seed)
    manifest = {"settings": settings, "tasks": {}}

    rows = {side: word_order_rows(documents[side], n, rng, side)
            for side, n in (("train", num_train), ("dev", num_dev))}
    os.makedirs(os.path.join(folder, "word_order"), exist_ok=True)
    for side, side_rows in rows.items():
        _write(os.path.join(folder, "word_order", f"{side}.tsv"), "".join(
            f"stdlib\t{label}\t{'' if label else '*'}\t{sentence}\n"
            for label, sentence in side_rows))
    manifest["tasks"]["word_order"] = {
        "finetune_task": "glue/cola", "layout": "CoLA", "metric": "accuracy",
        "train": num_train, "dev": num_dev,
        "majority": _majority_accuracy([r[0] for r in rows["train"]],
                                       [r[0] for r in rows["dev"]]),
        "bag_of_words": bag_of_words_accuracy(rows)}

    pairs = {side: sentence_order_rows(documents[side], n, rng, side)
             for side, n in (("train", num_train), ("dev", num_dev))}
    os.makedirs(os.path.join(folder, "sentence_order"), exist_ok=True)
    for side, side_rows in pairs.items():
        lines = ["index\tsentence1\tsentence2\tlabel\n"] + [
            f"{k}\t{a}\t{b}\t{'entailment' if label else 'not_entailment'}\n"
            for k, (label, a, b) in enumerate(side_rows)]
        _write(os.path.join(folder, "sentence_order", f"{side}.tsv"), "".join(lines))
    manifest["tasks"]["sentence_order"] = {
        "finetune_task": "glue/rte", "layout": "RTE", "metric": "accuracy",
        "train": num_train, "dev": num_dev,
        "majority": _majority_accuracy([r[0] for r in pairs["train"]],
                                       [r[0] for r in pairs["dev"]]),
        "bag_of_words": bag_of_words_accuracy(
            {side: [(label, _tagged(a, "a") + " " + _tagged(b, "b")) for label, a, b in rows]
             for side, rows in pairs.items()})}

    data = {side: span_qa_articles(documents[side], n, rng, side, prefix=f"{side}-")
            for side, n in (("train", num_train), ("dev", num_dev))}
    os.makedirs(os.path.join(folder, "span_qa"), exist_ok=True)
    for side, articles in data.items():
        _write(os.path.join(folder, "span_qa", f"{side}-v1.1.json"),
               json.dumps({"version": "1.1", "data": articles}, indent=1))
    answer_words = sorted(len(qa["answers"][0]["text"].split()) for article in data["train"]
                          for p in article["paragraphs"] for qa in p["qas"])
    num_words = answer_words[len(answer_words) // 2]  # the median answer length
    manifest["tasks"]["span_qa"] = {
        "finetune_task": "squad", "layout": "SQuAD v1.1", "metric": "f1",
        "train": num_train, "dev": num_dev,
        "majority": first_words_f1(data["dev"], num_words)["f1"],
        "majority_means": f"F1 of always answering the paragraph's first {num_words} word(s)"}
    _write(manifest_path, json.dumps(manifest, indent=2))
    return manifest


FLAGS = flags.FLAGS


def main(argv):
    del argv
    manifest = write_ablation_tasks(FLAGS.output_dir, FLAGS.num_train, FLAGS.num_dev, FLAGS.seed)
    for name, task in manifest["tasks"].items():
        print(f"{name}: {task['train']} train / {task['dev']} dev ({task['layout']} layout, "
              f"--task={task['finetune_task']}); trivial baseline {task['metric']} "
              f"{task['majority']:.4f}")


def cli():
    """`python -m training.ablation_tasks`: flags, then `main` on a quiet console."""
    flags.DEFINE_string("output_dir", "ablation_tasks", "Folder for the three tasks.")
    flags.DEFINE_integer("num_train", 2000, "Training rows (questions) per task.")
    flags.DEFINE_integer("num_dev", 400, "Dev rows (questions) per task.")
    flags.DEFINE_integer("seed", 0, "Sampling seed.")
    console.run(main, __name__)


if __name__ == "__main__":
    cli()

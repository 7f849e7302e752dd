"""Small fine-tuning tasks made offline from the default corpus, for the
miniature of the BERT paper's Tables 5 and 1 (`training.ablations`).

No GLUE or SQuAD data can be downloaded here, so each kind of task gets a
stand-in made from the pretraining corpus (the standard library's docstrings
and pydoc topics), in the official file layout `training.finetune` reads:

- `topic/` (single sentence, SST-2 layout): is a sentence from the library
  reference's internet chapters (`INTERNET_SOURCES`) or from elsewhere.
- `answer_sentence/` (sentence pair, QNLI layout and QNLI's construction):
  a question made from a sentence (a span of one to three words, each once
  in the paragraph, replaced by "what") with that sentence (entailment) or
  with its neighbour in a two-sentence paragraph (not_entailment).
- `span_qa/` (SQuAD v1.1 JSON, `--task=squad`): the same kind of question,
  its answer at its exact character offset in the sentence it was made
  from; the answer's end is marked only by the words to its right.

`word_order`, `replaced_word` and `sentence_order` are the candidates the
calibration (`training.ablation.calibration`) found unlearnable at this
scale; they stay buildable so that calibration can be rerun.

Train and validation rows come from the documents pretraining reads, dev
rows from the 15% it holds out, less sentences that also stand in a
training document. `<task>/select/` holds the training rows with the
validation rows as its dev (the learning-rate choice). `tasks.json`
records the sizes and baselines: the majority class, for span QA the
official F1 of always answering the paragraph's first words, and for the
classification tasks logistic regression on word 1-2 grams.

    python -m training.ablation.tasks --output_dir=/tmp/ablation_tasks
"""

import hashlib
import json
import os
import random
import re

from absl import flags

from command_line import console
from training.default_corpus import default_documents

HELDOUT_PERCENT = 15  # of the documents: Table 5's corpus holds them out of pretraining
MIN_WORDS, MAX_WORDS = 6, 30  # a sentence for word order and questions
PAIR_MIN_WORDS, PAIR_MAX_WORDS = 4, 30  # each sentence of a pair
PARAGRAPH_SENTENCES = 1  # span QA: a paragraph is one sentence (calibrated)
PAIR_PARAGRAPH_SENTENCES = 2  # answer sentence: the other sentence is the neighbour
MAX_ANSWER_WORDS = 3
QUESTIONS_PER_PARAGRAPH = 2
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


def split_documents(with_sources=False):
    """`{"train": [...], "dev": [...]}` of the default corpus's documents
    (lists of sentences); dev is what pretraining holds out, less the
    sentences that also stand in a training document.
    `with_sources`: `(source, sentences)` pairs instead
    (`training.default_corpus.document_sources`)."""
    from training.default_corpus import document_sources

    sources = document_sources() if with_sources else {}
    sides = {"train": [], "dev": []}
    for sentences in default_documents():
        # The same bucket as write_default_corpus gives the document.
        text = "\n".join(sentences)
        digest = hashlib.sha256(text.encode()).hexdigest()
        side = "dev" if int(digest, 16) % 100 < HELDOUT_PERCENT else "train"
        cleaned = [_clean(s) for s in sentences if "\t" not in s]
        sides[side].append((sources[text], cleaned) if with_sources else cleaned)
    # A sentence that also stands in a training document (docstrings repeat
    # themselves) was seen in pretraining: not in dev.
    seen = {s for d in sides["train"] for s in (d[1] if with_sources else d)}
    sides["dev"] = [(d[0], [s for s in d[1] if s not in seen]) if with_sources
                    else [s for s in d if s not in seen] for d in sides["dev"]]
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


def replaced_word_rows(documents, count, rng, side="train"):
    """`[(label, sentence)]`: half as written (1), half with one word replaced
    (0) by a word drawn from the side's own word frequencies (ELECTRA's
    replaced-token detection, asked of the whole sentence)."""
    seen, sentences, words = set(), [], []
    for document in documents:
        for sentence in document:
            split = sentence.split()
            words += split
            if MIN_WORDS <= len(split) <= MAX_WORDS and sentence not in seen:
                seen.add(sentence)
                sentences.append(sentence)
    chosen = _take(sentences, count, rng, "sentences", side)
    rows = []
    for k, sentence in enumerate(chosen):
        if k % 2 == 0:
            rows.append((1, sentence))
            continue
        split = sentence.split()
        i = rng.randrange(len(split))
        while True:
            word = rng.choice(words)  # by frequency: every occurrence is a ticket
            if word.lower() != split[i].lower():
                break
        split[i] = word
        rows.append((0, " ".join(split)))
    rng.shuffle(rows)
    return rows


# The Python Library Reference's chapters "Internet Data Handling" and
# "Internet Protocols and Support" (3.11), by top-level module.
INTERNET_SOURCES = frozenset("""
    email json mailbox mimetypes base64 binascii quopri uu
    webbrowser wsgiref urllib http ftplib poplib imaplib smtplib smtpd uuid socketserver
    xmlrpc ipaddress cgi cgitb nntplib telnetlib
    """.split())


def topic_rows(documents, count, rng, side="train"):
    """`[(label, sentence)]`: half from the library's internet chapters (1,
    `INTERNET_SOURCES`), half from everything else (0); `documents` are
    `(source, sentences)` pairs."""
    seen, groups = set(), {0: [], 1: []}
    for source, sentences in documents:
        for sentence in sentences:
            if MIN_WORDS <= len(sentence.split()) <= MAX_WORDS and sentence not in seen:
                seen.add(sentence)
                groups[int(source in INTERNET_SOURCES)].append(sentence)
    rows = [(1, s) for s in _take(groups[1], (count + 1) // 2, rng, "internet sentences", side)]
    rows += [(0, s) for s in _take(groups[0], count // 2, rng, "other sentences", side)]
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


def answer_sentence_rows(documents, count, rng, side="train"):
    """`[(label, question, sentence)]` in QNLI's form: a question made from one
    sentence of a paragraph as in span QA (a span replaced by "what"), paired
    with that sentence (1: it holds the answer) or with another sentence of
    the same paragraph (0), half and half."""
    candidates = []  # (question, its sentence, another sentence of the paragraph)
    for document in documents:
        for p in range(0, len(document), PAIR_PARAGRAPH_SENTENCES):
            sentences = document[p:p + PAIR_PARAGRAPH_SENTENCES]
            context_words = " ".join(sentences).split()
            for i, sentence in enumerate(sentences):
                words = sentence.split()
                others = [s for j, s in enumerate(sentences) if j != i and s != sentence
                          and PAIR_MIN_WORDS <= len(s.split()) <= PAIR_MAX_WORDS]
                if not MIN_WORDS <= len(words) <= MAX_WORDS or not others:
                    continue
                spans = _answer_spans(words, context_words)
                if spans:
                    first, last, _, _ = rng.choice(spans)
                    candidates.append((_question(words, first, last), sentence,
                                       rng.choice(others)))
    chosen = _take(candidates, count, rng, "questions with another sentence beside them", side)
    rows = [(1, q, s) if k % 2 == 0 else (0, q, other)
            for k, (q, s, other) in enumerate(chosen)]
    rng.shuffle(rows)
    return rows


def first_words_f1(data, num_words):
    """Official SQuAD v1.1 F1 and EM of always answering the context's first words."""
    from tasks.squad_metrics import evaluate_v1

    predictions = {qa["id"]: " ".join(p["context"].split()[:num_words])
                   for article in data for p in article["paragraphs"] for qa in p["qas"]}
    return evaluate_v1(data, predictions)


def bag_of_words_accuracy(task):
    """Dev accuracy of logistic regression (C=1) on lowercased word unigrams +
    bigrams; `task` is `{"train": [(label, text)], "dev": [...]}`.

    `training.ablation.word_order_task` picks C by cross-validation; one fit is
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


def _tsv(header, rows):
    return "".join([header] + ["\t".join(map(str, row)) + "\n" for row in rows])


TASK_FILES = {  # name: (training.finetune --task, layout, train file, dev file)
    "word_order": ("glue/cola", "CoLA", "train.tsv", "dev.tsv"),
    "replaced_word": ("glue/sst2", "SST-2", "train.tsv", "dev.tsv"),
    "topic": ("glue/sst2", "SST-2", "train.tsv", "dev.tsv"),
    "sentence_order": ("glue/rte", "RTE", "train.tsv", "dev.tsv"),
    "answer_sentence": ("glue/qnli", "QNLI", "train.tsv", "dev.tsv"),
    "span_qa": ("squad", "SQuAD v1.1", "train-v1.1.json", "dev-v1.1.json"),
}
TASK_NAMES = ("topic", "answer_sentence", "span_qa")  # Table 5's; the rest were candidates


def _rows(name, documents, count, rng, side):
    if name == "word_order":
        return word_order_rows(documents, count, rng, side)
    if name == "replaced_word":
        return replaced_word_rows(documents, count, rng, side)
    if name == "topic":
        return topic_rows(documents, count, rng, side)
    if name == "sentence_order":
        return sentence_order_rows(documents, count, rng, side)
    return answer_sentence_rows(documents, count, rng, side)


def _file_text(name, rows):
    if name == "word_order":  # CoLA: source, label, original mark, sentence; no header
        return _tsv("", [("stdlib", label, "" if label else "*", s) for label, s in rows])
    if name in ("replaced_word", "topic"):  # SST-2
        return _tsv("sentence\tlabel\n", [(s, label) for label, s in rows])
    names = {1: "entailment", 0: "not_entailment"}
    if name == "sentence_order":  # RTE
        return _tsv("index\tsentence1\tsentence2\tlabel\n",
                    [(k, a, b, names[label]) for k, (label, a, b) in enumerate(rows)])
    return _tsv("index\tquestion\tsentence\tlabel\n",  # QNLI
                [(k, a, b, names[label]) for k, (label, a, b) in enumerate(rows)])


def _bag_text(row):
    """A row's text for the bag of words: pairs' words marked with their segment."""
    if len(row) == 2:
        return row[1]
    return _tagged(row[1], "a") + " " + _tagged(row[2], "b")


def _write_task(folder, name, sides):
    """`sides`: {"train", "validation", "dev"} rows (SQuAD: article lists).
    `folder/name/` holds train and dev; `folder/name/select/` the same
    training rows with validation as its dev (the learning-rate choice)."""
    _, _, train_file, dev_file = TASK_FILES[name]
    layouts = {"": ("train", "dev"), "select": ("train", "validation")}
    for sub, (train_side, dev_side) in layouts.items():
        if sub and not sides.get("validation"):
            continue
        target = os.path.join(folder, name, sub)
        os.makedirs(target, exist_ok=True)
        for file, side in ((train_file, train_side), (dev_file, dev_side)):
            if name == "span_qa":
                text = json.dumps({"version": "1.1", "data": sides[side]}, indent=1)
            else:
                text = _file_text(name, sides[side])
            _write(os.path.join(target, file), text)


def write_ablation_tasks(folder, num_train=2000, num_dev=400, seed=0, num_validation=0,
                         names=TASK_NAMES):
    """Writes the tasks `names` under `folder`; returns the `tasks.json` record.

    Training and validation rows come from the documents pretraining reads,
    dev rows from those it holds out. Each task draws from its own random
    stream (`seed` and its name), so one task's rows do not depend on which
    others are written. Already there with the same settings: read, not
    rewritten.
    """
    manifest_path = os.path.join(folder, "tasks.json")
    settings = {"num_train": num_train, "num_validation": num_validation, "num_dev": num_dev,
                "seed": seed, "names": list(names)}
    if os.path.exists(manifest_path):
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
        if manifest.get("settings") == settings:
            return manifest
    documents = split_documents(with_sources="topic" in names)
    manifest = {"settings": settings, "tasks": {}}
    for name in names:
        rng = random.Random(f"{seed}/{name}")
        finetune_task, layout, _, _ = TASK_FILES[name]
        record = {"finetune_task": finetune_task, "layout": layout, "train": num_train,
                  "validation": num_validation, "dev": num_dev}
        if name == "topic":
            docs = documents
        else:  # plain lists of sentences
            docs = {side: [d[1] if isinstance(d, tuple) else d for d in side_docs]
                    for side, side_docs in documents.items()}
        if name == "span_qa":
            train = span_qa_articles(docs["train"], num_train + num_validation, rng, "train",
                                     prefix="train-")
            sides = {"train": _take_questions(train, 0, num_train),
                     "validation": _take_questions(train, num_train, num_train + num_validation),
                     "dev": span_qa_articles(docs["dev"], num_dev, rng, "dev", prefix="dev-")}
            answer_words = sorted(len(qa["answers"][0]["text"].split())
                                  for article in sides["train"] for p in article["paragraphs"]
                                  for qa in p["qas"])
            num_words = answer_words[len(answer_words) // 2]  # the median answer length
            record.update(metric="f1", majority=first_words_f1(sides["dev"], num_words)["f1"],
                          majority_means=f"F1 of always answering the paragraph's first "
                                         f"{num_words} word(s)")
        else:
            train, validation = _split_balanced(
                _rows(name, docs["train"], num_train + num_validation, rng, "train"), num_train)
            sides = {"train": train, "validation": validation,
                     "dev": _rows(name, docs["dev"], num_dev, rng, "dev")}
            bag = {side: [(row[0], _bag_text(row)) for row in sides[side]]
                   for side in ("train", "dev")}
            record.update(
                metric="accuracy",
                majority=_majority_accuracy([r[0] for r in sides["train"]],
                                            [r[0] for r in sides["dev"]]),
                bag_of_words=bag_of_words_accuracy(bag))
        _write_task(folder, name, sides)
        manifest["tasks"][name] = record
    _write(manifest_path, json.dumps(manifest, indent=2))
    return manifest


def _split_balanced(rows, count):
    """`rows` (half of each label, shuffled) as `count` rows and the rest,
    each side half and half (odd sizes: the extra row is a 1)."""
    by_label = {1: [r for r in rows if r[0] == 1], 0: [r for r in rows if r[0] == 0]}
    first = by_label[1][:(count + 1) // 2] + by_label[0][:count // 2]
    rest = by_label[1][(count + 1) // 2:] + by_label[0][count // 2:]
    order = {id(r): k for k, r in enumerate(rows)}  # keep the shuffled order
    return sorted(first, key=lambda r: order[id(r)]), sorted(rest, key=lambda r: order[id(r)])


def _take_questions(articles, start, stop):
    """The articles holding questions `start` .. `stop - 1`, in order."""
    out, index = [], 0
    for article in articles:
        paragraphs = []
        for paragraph in article["paragraphs"]:
            qas = [qa for k, qa in enumerate(paragraph["qas"], index) if start <= k < stop]
            index += len(paragraph["qas"])
            if qas:
                paragraphs.append({"context": paragraph["context"], "qas": qas})
        if paragraphs:
            out.append({"title": article["title"], "paragraphs": paragraphs})
    return out


FLAGS = flags.FLAGS


def main(argv):
    del argv
    manifest = write_ablation_tasks(FLAGS.output_dir, FLAGS.num_train, FLAGS.num_dev, FLAGS.seed,
                                    FLAGS.num_validation)
    for name, task in manifest["tasks"].items():
        print(f"{name}: {task['train']} train / {task['dev']} dev ({task['layout']} layout, "
              f"--task={task['finetune_task']}); trivial baseline {task['metric']} "
              f"{task['majority']:.4f}")


def cli():
    """`python -m training.ablation.tasks`: flags, then `main` on a quiet console."""
    flags.DEFINE_string("output_dir", "ablation_tasks", "Folder for the three tasks.")
    flags.DEFINE_integer("num_train", 2000, "Training rows (questions) per task.")
    flags.DEFINE_integer("num_dev", 400, "Dev rows (questions) per task.")
    flags.DEFINE_integer("num_validation", 0, "Validation rows per task (select/ folders).")
    flags.DEFINE_integer("seed", 0, "Sampling seed.")
    console.run(main, __name__)


if __name__ == "__main__":
    cli()

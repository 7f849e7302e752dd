"""Small fine-tuning tasks made offline from the default corpus, for the
miniature of the BERT paper's Tables 5 and 1 (`training.ablations`).

No GLUE or SQuAD data can be downloaded here, so each kind of task gets a
stand-in made from the pretraining corpus (the standard library's docstrings
and pydoc topics), in the official file layout `training.finetune` reads:

- `topic/` (single sentence, SST-2 layout): is a sentence from the library
  reference's internet chapters (`task_rows.INTERNET_SOURCES`) or from
  elsewhere.
- `answer_sentence/` (sentence pair, QNLI layout and QNLI's construction):
  a question made from a sentence (a span of one to three words, each once
  in the paragraph, replaced by "what") with that sentence (entailment) or
  with its neighbour in a two-sentence paragraph (not_entailment).
- `span_qa/` (SQuAD v1.1 JSON, `--task=squad`): the same kind of question,
  its answer at its exact character offset in the sentence it was made
  from; the answer's end is marked only by the words to its right.

The rows are made in `training.ablation.task_rows`; this module picks the
documents, writes the folders and measures the baselines.

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

from absl import flags
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegression

from tf_records.command_line import console
from training.ablation.task_rows import answer_sentence_rows
from training.ablation.task_rows import replaced_word_rows
from training.ablation.task_rows import sentence_order_rows
from training.ablation.task_rows import span_qa_articles
from training.ablation.task_rows import topic_rows
from training.ablation.task_rows import word_order_rows
from training.pretraining.default_corpus import default_documents
from training.pretraining.default_corpus import document_sources
from training.tasks.squad_metrics import evaluate_v1

HELDOUT_PERCENT = 15  # of the documents: Table 5's corpus holds them out of pretraining


def _clean(sentence):
    return " ".join(sentence.split())


def split_documents(with_sources=False):
    """`{"train": [...], "dev": [...]}` of the default corpus's documents
    (lists of sentences); dev is what pretraining holds out, less the
    sentences that also stand in a training document.
    `with_sources`: `(source, sentences)` pairs instead
    (`training.pretraining.default_corpus.document_sources`)."""
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


def first_words_f1(data, num_words):
    """Official SQuAD v1.1 F1 and EM of always answering the context's first words."""
    predictions = {qa["id"]: " ".join(p["context"].split()[:num_words])
                   for article in data for p in article["paragraphs"] for qa in p["qas"]}
    return evaluate_v1(data, predictions)


def bag_of_words_accuracy(task):
    """Dev accuracy of logistic regression (C=1) on lowercased word unigrams +
    bigrams; `task` is `{"train": [(label, text)], "dev": [...]}`.

    `training.ablation.word_order_task` picks C by cross-validation; one fit is
    enough for a reference row here and takes a second, not a minute.
    """
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
                         names=TASK_NAMES, span_qa_num_train=None):
    """Writes the tasks `names` under `folder`; returns the `tasks.json` record.

    `span_qa_num_train` (default `num_train`): span QA's training rows, the
    same first `num_train` questions and then those after its validation
    rows, so that its validation and dev rows do not depend on it.

    Training and validation rows come from the documents pretraining reads,
    dev rows from those it holds out. Each task draws from its own random
    stream (`seed` and its name), so one task's rows do not depend on which
    others are written. Already there with the same settings: read, not
    rewritten.
    """
    manifest_path = os.path.join(folder, "tasks.json")
    settings = _task_settings(num_train, num_validation, num_dev, seed, names, span_qa_num_train)
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
            more = settings.get("span_qa_num_train", num_train) - num_train
            record["train"] += more
            sides = _span_qa_sides(docs, rng, num_train, num_validation, num_dev, more)
            record.update(_span_qa_baseline(sides))
        else:
            train, validation = _split_balanced(
                _rows(name, docs["train"], num_train + num_validation, rng, "train"), num_train)
            sides = {"train": train, "validation": validation,
                     "dev": _rows(name, docs["dev"], num_dev, rng, "dev")}
            record.update(_classification_baselines(sides))
        _write_task(folder, name, sides)
        manifest["tasks"][name] = record
    _write(manifest_path, json.dumps(manifest, indent=2))
    return manifest


def _task_settings(num_train, num_validation, num_dev, seed, names, span_qa_num_train):
    """The `settings` of `tasks.json`: what the rows depend on."""
    settings = {"num_train": num_train, "num_validation": num_validation, "num_dev": num_dev,
                "seed": seed, "names": list(names)}
    if span_qa_num_train is not None and span_qa_num_train != num_train:
        if span_qa_num_train < num_train:
            raise ValueError(f"span_qa_num_train={span_qa_num_train}: at least num_train "
                             f"({num_train}).")
        settings["span_qa_num_train"] = span_qa_num_train
    return settings


def _span_qa_sides(docs, rng, num_train, num_validation, num_dev, more):
    """Span QA's `{"train", "validation", "dev"}` articles: `more` training
    questions past the first `num_train` are those drawn after the
    validation rows, from the same stream."""
    state = rng.getstate()  # the draw consumes the stream alike for any count
    train = span_qa_articles(docs["train"], num_train + num_validation, rng, "train",
                             prefix="train-")
    sides = {"train": _take_questions(train, 0, num_train),
             "validation": _take_questions(train, num_train, num_train + num_validation),
             "dev": span_qa_articles(docs["dev"], num_dev, rng, "dev", prefix="dev-")}
    if more:  # the questions drawn after those, from the same stream
        again = random.Random()
        again.setstate(state)
        everything = span_qa_articles(docs["train"], None, again, "train", prefix="train-")
        sides["train"] = sides["train"] + _questions_after(
            everything, num_train + num_validation, more, "train-", sides["validation"])
    return sides


def _span_qa_baseline(sides):
    """Span QA's metric and trivial baseline: the official F1 of always
    answering the paragraph's first words, as many as the median answer."""
    answer_words = sorted(len(qa["answers"][0]["text"].split())
                          for article in sides["train"] for p in article["paragraphs"]
                          for qa in p["qas"])
    num_words = answer_words[len(answer_words) // 2]  # the median answer length
    return {"metric": "f1", "majority": first_words_f1(sides["dev"], num_words)["f1"],
            "majority_means": f"F1 of always answering the paragraph's first "
                              f"{num_words} word(s)"}


def _classification_baselines(sides):
    """A classification task's metric and baselines: the majority class of
    train, and the bag of words."""
    bag = {side: [(row[0], _bag_text(row)) for row in sides[side]] for side in ("train", "dev")}
    return {"metric": "accuracy",
            "majority": _majority_accuracy([r[0] for r in sides["train"]],
                                           [r[0] for r in sides["dev"]]),
            "bag_of_words": bag_of_words_accuracy(bag)}


def _split_balanced(rows, count):
    """`rows` (half of each label, shuffled) as `count` rows and the rest,
    each side half and half (odd sizes: the extra row is a 1)."""
    by_label = {1: [r for r in rows if r[0] == 1], 0: [r for r in rows if r[0] == 0]}
    first = by_label[1][:(count + 1) // 2] + by_label[0][:count // 2]
    rest = by_label[1][(count + 1) // 2:] + by_label[0][count // 2:]
    order = {id(r): k for k, r in enumerate(rows)}  # keep the shuffled order
    return sorted(first, key=lambda r: order[id(r)]), sorted(rest, key=lambda r: order[id(r)])


def _usable_after(articles, first, prefix, validation):
    """`(draw, article, paragraph, question)` of every question of `articles`
    drawn after the first `first` (their ids are `prefix` and the draw's
    number), in the order drawn, leaving out paragraphs whose text is also a
    validation paragraph (the corpus repeats sentences)."""
    seen = {p["context"] for article in validation for p in article["paragraphs"]}
    drawn = sorted((int(qa["id"][len(prefix):]), a, p, qa)
                   for a, article in enumerate(articles)
                   for p, paragraph in enumerate(article["paragraphs"])
                   for qa in paragraph["qas"] if paragraph["context"] not in seen)
    return [row for row in drawn if row[0] >= first]


def span_qa_supply(num_train, num_validation, seed=0):
    """The most span-QA training rows (`span_qa_num_train`) the default
    corpus gives `write_ablation_tasks` with these settings: its first
    `num_train` and every usable question drawn after the validation rows.
    Only span QA's rows are drawn (about a second), so a flag can be checked
    before anything is written."""
    docs = split_documents()["train"]  # the same sentences as with sources
    first = num_train + num_validation
    drawn = span_qa_articles(docs, first, random.Random(f"{seed}/span_qa"), "train",
                             prefix="train-")
    everything = span_qa_articles(docs, None, random.Random(f"{seed}/span_qa"), "train",
                                  prefix="train-")
    return num_train + len(_usable_after(everything, first, "train-",
                                         _take_questions(drawn, num_train, first)))


def _questions_after(articles, first, count, prefix, validation):
    """`count` questions of `articles` drawn after the first `first`
    (`_usable_after`), grouped back into articles."""
    drawn = _usable_after(articles, first, prefix, validation)[:count]
    if len(drawn) < count:
        raise ValueError(f"Only {len(drawn)} more usable span-QA training questions in the "
                         f"default corpus; asked for {count}. Ask for fewer.")
    grouped = {}
    for _, a, p, qa in sorted(drawn, key=lambda row: row[1:3]):
        grouped.setdefault(a, {}).setdefault(p, []).append(qa)
    return [{"title": articles[a]["title"],
             "paragraphs": [{"context": articles[a]["paragraphs"][p]["context"], "qas": qas}
                            for p, qas in paragraphs.items()]}
            for a, paragraphs in grouped.items()]


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

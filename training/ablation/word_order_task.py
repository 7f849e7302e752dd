"""A small real-text acceptability task, made offline, and its bag-of-words baselines.

No GLUE data can be downloaded here, so this makes a CoLA-like task from
the default corpus (the standard library's docstrings and pydoc topics):
each sentence appears once, either as written (label 1, acceptable) or with
two of its words swapped (label 0). Train and dev come from different
documents. The files are in CoLA's layout (`train.tsv`, `dev.tsv`: source,
label, mark, sentence; no header), so `python -m training.finetune
--task=glue/cola` reads them as they are.

A unigram bag of words sees the same bag in both versions of a sentence, so
it cannot beat chance by construction; a unigram + bigram bag can (a swap
makes up to four new bigrams) and is the baseline to beat.

    python -m training.ablation.word_order_task --output_dir=/tmp/word_order
"""

import hashlib
import os
import random

from absl import flags
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegressionCV

from tf_records.command_line import console
from training.ablation.task_rows import swap_two_words
from training.pretraining.default_corpus import default_documents

MIN_WORDS, MAX_WORDS = 6, 30


def _usable(sentence):
    words = sentence.split()
    return MIN_WORDS <= len(words) <= MAX_WORDS and "\t" not in sentence


def make_word_order_task(num_train=4000, num_dev=1000, seed=0):
    """`{"train": [(label, sentence)], "dev": [...]}`, half of each swapped.

    Documents go to dev when a hash of their text says so (about 20%), so no
    document gives sentences to both sides; sentences repeated anywhere in
    the corpus are dropped.
    """
    rng = random.Random(seed)
    sides = {"train": [], "dev": []}
    seen = set()
    for sentences in default_documents():
        digest = int(hashlib.sha256("\n".join(sentences).encode()).hexdigest(), 16)
        side = "dev" if digest % 5 == 0 else "train"
        for sentence in sentences:
            sentence = " ".join(sentence.split())
            if _usable(sentence) and sentence not in seen:
                seen.add(sentence)
                sides[side].append(sentence)
    out = {}
    for side, count in (("train", num_train), ("dev", num_dev)):
        if len(sides[side]) < count:
            raise ValueError(f"Only {len(sides[side])} usable {side} sentences; asked for {count}.")
        chosen = rng.sample(sides[side], count)
        out[side] = [(1, s) if k % 2 == 0 else (0, swap_two_words(s, rng))
                     for k, s in enumerate(chosen)]
        rng.shuffle(out[side])
    return out


def write_word_order_task(folder, num_train=4000, num_dev=1000, seed=0):
    """Writes `train.tsv` and `dev.tsv` in CoLA's layout; returns the task."""
    task = make_word_order_task(num_train, num_dev, seed)
    os.makedirs(folder, exist_ok=True)
    for side, rows in task.items():
        path = os.path.join(folder, f"{side}.tsv")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            for label, sentence in rows:
                f.write(f"stdlib\t{label}\t{'' if label else '*'}\t{sentence}\n")
        os.replace(path + ".tmp", path)
    return task


def bag_of_words_accuracy(task, ngram_range=(1, 1)):
    """Dev accuracy of logistic regression on word (n-gram) counts.

    Lowercased words as BERT's uncased tokenizer sees them; C chosen by
    5-fold cross-validation on train only.
    """
    vectorizer = CountVectorizer(ngram_range=ngram_range, token_pattern=r"\S+", lowercase=True)
    train_x = vectorizer.fit_transform([s for _, s in task["train"]])
    dev_x = vectorizer.transform([s for _, s in task["dev"]])
    classifier = LogisticRegressionCV(Cs=[0.01, 0.1, 1, 10, 100], cv=5, max_iter=2000,
                                      scoring="accuracy", use_legacy_attributes=False,
                                      l1_ratios=(0.0,))
    classifier.fit(train_x, [label for label, _ in task["train"]])
    return float(classifier.score(dev_x, [label for label, _ in task["dev"]]))


FLAGS = flags.FLAGS


def main(argv):
    del argv
    task = write_word_order_task(FLAGS.output_dir, FLAGS.num_train, FLAGS.num_dev, FLAGS.seed)
    print(f"Wrote {len(task['train'])} train and {len(task['dev'])} dev sentences "
          f"to {FLAGS.output_dir} (CoLA layout).")
    for name, ngrams in (("unigram", (1, 1)), ("unigram+bigram", (1, 2))):
        print(f"Bag-of-words ({name}) logistic regression, dev accuracy: "
              f"{bag_of_words_accuracy(task, ngrams):.4f}")


def cli():
    """`python -m training.ablation.word_order_task`: flags, then `main` on a quiet console."""
    flags.DEFINE_string("output_dir", "word_order_task", "Folder for train.tsv and dev.tsv.")
    flags.DEFINE_integer("num_train", 4000, "Training sentences.")
    flags.DEFINE_integer("num_dev", 1000, "Dev sentences.")
    flags.DEFINE_integer("seed", 0, "Sampling and swapping seed.")
    console.run(main, __name__)


if __name__ == "__main__":
    cli()

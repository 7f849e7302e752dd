"""Makes `conll_goldens.json`: what the original `conlleval` script prints.

Run by hand (not in CI) with Perl and the script's text saved locally (the
2004-01-26 version by Erik Tjong Kim Sang, as distributed with the CoNLL
shared tasks; it is not part of this repository):

    python -m venv /tmp/seqeval-venv
    /tmp/seqeval-venv/bin/pip install seqeval==1.2.2 numpy
    /tmp/seqeval-venv/bin/python tests/goldens/make_conll_goldens.py conlleval.pl

Cases: the tests' hand-computed examples; random tag sequences (BIO/IOB1
tags, and "noisy" ones with E-, S-, type-less and hyphenated-type tags that
exercise conlleval's odd rules), each scored by `perl conlleval.pl < file`;
plus the test fixture's sentences written by `training.tasks.conll.write_predictions`
with perturbed predictions, that file itself fed to Perl. seqeval 1.2.2 (default, "conlleval-compatible"
mode) is a second reference for the BIO/IOB1 cases; its numbers are stored
too. seqeval reads S-/E- tags its own way, so the noisy cases have none.
"""

import json
import os
import random
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)
from training.tasks.conll import read_conll  # noqa: E402
from training.tasks.conll import write_predictions  # noqa: E402

OUT = os.path.join(HERE, "conll_goldens.json")
FIXTURE = os.path.join(ROOT, "tests", "data", "conll", "eng_sample.txt")
BIO_TAGS = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
# The hand-computed cases of tests/test_conll.py, so Perl confirms them.
HAND_CASES = {
    "iob1-vs-bio": ([["I-PER", "I-PER", "B-PER", "O"]], [["B-PER", "I-PER", "B-PER", "O"]]),
    "switch-and-overlap": (
        [["B-PER", "I-PER", "O", "I-LOC", "I-LOC", "O", "B-ORG", "I-ORG", "I-ORG"]],
        [["B-PER", "I-PER", "O", "I-LOC", "I-ORG", "O", "B-ORG", "I-ORG", "O"]],
    ),
    "boundary-ends-chunk": ([["I-PER"], ["I-PER"]], [["I-PER"], ["I-PER"]]),
    "b-ends-chunk": ([["B-LOC", "B-LOC"]], [["B-LOC", "I-LOC"]]),
    "nothing-predicted": ([["B-PER", "O"]], [["O", "O"]]),
}
NOISY_TAGS = [
    "O", "O", "B-PER", "I-PER", "E-PER", "S-PER", "I-LOC", "B-MISC-X", "I-MISC-X", "B", "I"
]


def run_conlleval(script, path):
    """Parses `perl conlleval.pl < path`: overall counts and scores, per type."""
    with open(path, encoding="utf-8") as f:
        out = subprocess.run(
            ["perl", script], stdin=f, capture_output=True, text=True, check=True
        ).stdout
    lines = out.splitlines()
    counts = re.match(
        r"processed (\d+) tokens with (\d+) phrases; found: (\d+) phrases; correct: (\d+)\.",
        lines[0],
    )
    result = dict(
        zip(
            ["num_tokens", "num_gold_chunks", "num_predicted_chunks", "num_correct_chunks"],
            map(int, counts.groups()),
        )
    )
    scores = re.match(
        r"accuracy: +([\d.]+)%; precision: +([\d.]+)%; recall: +([\d.]+)%; FB1: +([\d.]+)",
        lines[1],
    )
    result.update(zip(["accuracy", "precision", "recall", "f1"], map(float, scores.groups())))
    result["per_type"] = {}
    for line in lines[2:]:
        row = re.match(
            r"^ *(\S*): precision: +([\d.]+)%; recall: +([\d.]+)%; FB1: +([\d.]+) +(\d+)$", line
        )
        name, precision, recall, f1, found = row.groups()
        result["per_type"][name] = {
            "precision": float(precision),
            "recall": float(recall),
            "f1": float(f1),
            "num_predicted_chunks": int(found),
        }
    return result


def seqeval_scores(gold, predicted):
    try:
        from seqeval import metrics
    except ImportError:
        return None
    return {
        "precision": 100 * metrics.precision_score(gold, predicted),
        "recall": 100 * metrics.recall_score(gold, predicted),
        "f1": 100 * metrics.f1_score(gold, predicted),
    }


def random_case(rng, name, tags):
    gold, predicted = [], []
    for _ in range(rng.randint(1, 6)):
        length = rng.randint(1, 12)
        gold.append([rng.choice(tags) for _ in range(length)])
        # Mostly the gold tag, so that some chunks come out right.
        predicted.append([t if rng.random() < 0.6 else rng.choice(tags) for t in gold[-1]])
    return {"name": name, "gold": gold, "predicted": predicted}


def main():
    script = sys.argv[1]
    rng = random.Random(2003)
    cases = [{"name": k, "gold": g, "predicted": p} for k, (g, p) in HAND_CASES.items()]
    cases += [random_case(rng, f"bio-{i}", BIO_TAGS) for i in range(40)]
    cases += [random_case(rng, f"noisy-{i}", NOISY_TAGS) for i in range(20)]
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            path = os.path.join(tmp, "case.txt")
            with open(path, "w", encoding="utf-8") as f:
                for gold, predicted in zip(case["gold"], case["predicted"]):
                    f.writelines(f"w {g} {p}\n" for g, p in zip(gold, predicted))
                    f.write("\n")
            case["conlleval"] = run_conlleval(script, path)
            if not case["name"].startswith("noisy"):
                case["seqeval"] = seqeval_scores(case["gold"], case["predicted"])

        # The fixture through write_predictions: the file format conlleval reads.
        sentences = read_conll(FIXTURE).sentences
        labels = sorted({label for s in sentences for label in s.labels})
        predicted = [
            [rng.choice(labels) if rng.random() < 0.3 else label for label in s.labels]
            for s in sentences
        ]
        path = os.path.join(tmp, "predictions.txt")
        write_predictions(path, sentences, predicted)
        gold = [list(s.labels) for s in sentences]
        cases.append({
            "name": "fixture-file",
            "gold": gold,
            "predicted": predicted,
            "conlleval": run_conlleval(script, path),
            "seqeval": seqeval_scores(gold, predicted),
        })

    for case in cases:
        ours, theirs = case["conlleval"], case.get("seqeval")
        if theirs:
            gap = max(abs(ours[k] - theirs[k]) for k in ("precision", "recall", "f1"))
            print(
                f"{case['name']}: conlleval F1 {ours['f1']:.2f}, "
                f"seqeval F1 {theirs['f1']:.2f}, largest gap {gap:.3f}"
            )
    with open(OUT, "w", encoding="utf-8") as f:
        reference = "conlleval 2004-01-26 (perl); seqeval 1.2.2"
        json.dump({"reference": reference, "cases": cases}, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()

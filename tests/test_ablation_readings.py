"""The final design's secondary readings of a cell (PLAN.md, rule 4): the
median over seeds, how many seeds converged, and the dev score of the seed
best on validation; their block under each table, as text and Markdown;
and span QA's per-seed validation curves. Seeds from before the design
carry none of it, and their tables render as they always have."""

import copy
import json
import os

from training.ablation.systems import TASKS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "docs", "results")
SETTINGS = {"pretrain_steps": 1500, "pretrain_batch_size": 32, "pretrain_seq_length": 128,
            "seeds": 3, "num_validation": 200, "num_train": 2500, "num_dev": 400,
            "span_qa_num_train": 9000}
TASK_FACTS = {"tasks": {
    "topic": {"majority": 0.5, "bag_of_words": 0.7},
    "answer_sentence": {"majority": 0.52, "bag_of_words": 0.6},
    "span_qa": {"majority": 9.0, "majority_means": "the first sentence"}}}


def _seed(k, score, validation=None, converged=None, epochs=None):
    """One seed's result: the old keys only when `converged` is None, else
    the final design's too (its curve peaks at `validation`)."""
    seed = {"seed": k, "score": score}
    if converged is None:
        return seed
    epochs = epochs or 4
    best = min(2, epochs)
    curve = [{"epoch": e, "loss": 2.0 / e,
              "validation": validation - (0 if e == best else 1.5 * abs(e - best))}
             for e in range(1, epochs + 1)]
    return {**seed, "validation": validation, "best_epoch": best, "epochs_trained": epochs,
            "converged": converged, "curve": curve, "wall_seconds": 1.0}


# (system, task): [(score, validation, converged)]; seed 1 and seed 2 of
# BERT's span QA tie on validation, and seed 2 scores higher on dev.
NEW = {
    ("bert", "topic"): [(80.0, 79.0, True), (82.0, 81.0, True), (81.0, 80.0, False)],
    ("bert", "answer_sentence"): [(70.0, 69.0, True), (74.0, 71.0, True),
                                  (72.0, 73.0, True)],
    ("bert", "span_qa"): [(40.0, 38.0, False), (44.0, 45.0, True), (50.0, 45.0, False)],
    ("no_nsp", "topic"): [(79.0, 78.0, True), (80.0, 79.0, True), (78.0, 77.0, True)],
    ("no_nsp", "answer_sentence"): [(66.0, 65.0, False), (68.0, 67.0, True),
                                    (67.0, 69.0, True)],
    ("no_nsp", "span_qa"): [(35.0, 34.0, True), (36.0, 33.0, True), (37.0, 36.0, True)],
}


def _cells(new):
    """`build_tables`' cells for BERT and No NSP, their seeds in the final
    design's form when `new`, else in the old one."""
    cells = {}
    for (system, task), seeds in NEW.items():
        shown = [_seed(k, s, v, c if new else None) for k, (s, v, c) in enumerate(seeds)]
        cells[system, task] = {"learning_rate": 1e-4, "selection": {"0.0001": 1.0},
                               "seeds": list(reversed(shown))}  # the row sorts them
    return cells


def _tables(new):
    from training.ablation.table import build_tables

    return build_tables(dict(SETTINGS), {}, TASK_FACTS, _cells(new), 60.0, "abcdef0123")


def _without_readings(text):
    """`(text less its readings blocks, the blocks)`: each block runs from the
    blank line before "Secondary readings" to the blank line after its rows."""
    lines, kept, blocks = text.split("\n"), [], []
    i = 0
    while i < len(lines):
        if lines[i] == "" and i + 1 < len(lines) and lines[i + 1].startswith(
                "Secondary readings"):
            end = lines.index("", i + 3)  # past the sentence (and Markdown's blank line)
            blocks += lines[i:end]
            i = end
        else:
            kept.append(lines[i])
            i += 1
    return "\n".join(kept), "\n".join(blocks)


def test_median():
    from training.ablation.stats import median

    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert median([7.5]) == 7.5
    assert median([]) is None


def test_readings_of_a_cell():
    """The median, the converged count and the best seed on validation (a tie
    to the lower seed index), beside the unchanged mean and verdicts."""
    table5, _ = _tables(new=True)
    old5, _ = _tables(new=False)
    span = table5["systems"]["bert"]["tasks"]["span_qa"]
    assert span["readings"] == {
        "median": 44.0, "converged": 1, "seeds": 3,
        "best_on_validation": {"seed": 1, "validation": 45.0, "score": 44.0}}
    answer = table5["systems"]["no_nsp"]["tasks"]["answer_sentence"]["readings"]
    assert answer == {"median": 67.0, "converged": 2, "seeds": 3,
                      "best_on_validation": {"seed": 2, "validation": 69.0, "score": 67.0}}
    assert table5["systems"]["bert"]["tasks"]["topic"]["readings"]["converged"] == 2
    # The means and the verdicts are the old design's, whatever the readings.
    for name in ("bert", "no_nsp"):
        for task in TASKS:
            assert (table5["systems"][name]["tasks"][task.name]["interval"]
                    == old5["systems"][name]["tasks"][task.name]["interval"])
    assert table5["directions"] == old5["directions"]


def test_old_seeds_have_no_readings_and_render_as_before():
    """Without the final design's keys no entry has readings and neither
    format shows the block; with them, the tables are the old ones with the
    block added after the main table."""
    from training.ablation.table import format_markdown
    from training.ablation.table import format_table

    old5, old1 = _tables(new=False)
    new5, new1 = _tables(new=True)
    assert not any("readings" in entry for table in (old5, old1)
                   for row in table["systems"].values() for entry in row["tasks"].values())
    old_md, new_md = format_markdown(old5, old1), format_markdown(new5, new1)
    old_text, new_text = format_table(old5, "Table 5"), format_table(new5, "Table 5")
    assert "Secondary readings" not in old_md and "Secondary readings" not in old_text
    assert new_md.count("Secondary readings") == 2  # under each table
    assert "Secondary readings" in new_text
    # The new output less its blocks is the old output, byte for byte.
    for old, new in ((old_md, new_md), (old_text, new_text)):
        kept, blocks = _without_readings(new)
        assert kept == old
        assert "median 44.0; converged 1/3; best-on-validation 44.0" in blocks
        assert "median 36.0; converged 3/3; best-on-validation 37.0" in blocks
    # And the committed results (seeds of the earlier designs) still print
    # the committed text, byte for byte.
    from training.ablation.table import format_tables

    for folder in ("extended_grid", "span_qa_rows/timed", "span_qa_rows/repretrained"):
        tables = [json.load(open(os.path.join(RESULTS, folder, f"{name}.json")))
                  if os.path.exists(os.path.join(RESULTS, folder, f"{name}.json")) else None
                  for name in ("table5", "table1")]
        expected = open(os.path.join(RESULTS, folder, "tables.txt"), encoding="utf-8").read()
        assert format_tables(*tables).lstrip("\n") + "\n" == expected, folder


def test_readings_block_in_markdown():
    """One Markdown row per system, one column per task, n/a kept."""
    from training.ablation.table import format_markdown

    table5, _ = _tables(new=True)
    table5 = copy.deepcopy(table5)
    table5["systems"]["no_nsp"]["tasks"]["span_qa"] = {"na": "not built"}
    page = format_markdown(table5, None)
    block = page[page.index("Secondary readings"):]
    rows = [line for line in block.splitlines() if line.startswith("| No NSP")]
    assert len(rows) == 1  # its readings' row; the main table's is above the block
    assert rows[0].endswith("| n/a |")
    assert "| BERT (MLM + NSP) | median 81.0; converged 2/3; best-on-validation 82.0 |" in block


def test_plot_curves(tmp_path):
    """A PNG of span QA's curves, one panel per system with curves; nothing
    written (False) without curves."""
    from PIL import Image

    from training.ablation.charts import plot_curves

    table5, _ = _tables(new=True)
    path = str(tmp_path / "curves.png")
    assert plot_curves(table5, path) is True
    with Image.open(path) as image:
        width, height = image.size
    assert width == 2 * 500 and height > 100  # two panels, 5 inches at 100 dpi each
    one = copy.deepcopy(table5)
    del one["systems"]["no_nsp"]
    assert plot_curves(one, str(tmp_path / "one.png"), task_name="topic") is True
    with Image.open(tmp_path / "one.png") as image:
        assert image.size[0] == 500
    old5, _ = _tables(new=False)
    empty = str(tmp_path / "none.png")
    assert plot_curves(old5, empty) is False
    assert not os.path.exists(empty)

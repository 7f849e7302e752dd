"""The secondary readings' blocks under Table 5 and Table 1 in miniature
(the final design, docs/results/final_design/PLAN.md, rule 4): beside each
cell's mean, the median over its seeds, how many converged, and the dev
score of its seed best on validation (`training.ablation.table`'s
`_readings` computes them), as text (`readings_text`) and Markdown
(`readings_markdown`). A table whose entries have no readings (seeds from
the earlier designs) gets no block.
"""

from training.ablation.systems import TASKS

READINGS = ("Secondary readings, beside the means (the verdicts stay on the paired means): "
            "the median over seeds; how many seeds converged (early stopping ended them "
            "before their epoch cap); and the paper's own reading (its section 4.1: restarts, "
            "the best on Dev) taken without letting dev choose: the dev score of the seed "
            "with the best validation score.")


def _reading(entry):
    """An entry's readings as "median M; converged c/n; best-on-validation B",
    "n/a", or "-" where it has none."""
    if "na" in entry:
        return "n/a"
    found = entry.get("readings")
    if not found:
        return "-"
    best = found["best_on_validation"]
    shown = f"{best['score']:.1f}" if best else "-"
    return (f"median {found['median']:.1f}; converged {found['converged']}/{found['seeds']}; "
            f"best-on-validation {shown}")


def _with_readings(table):
    """Whether any entry of `table` has readings."""
    return any("readings" in entry for row in table["systems"].values()
               for entry in row["tasks"].values())


def readings_text(table):
    """The lines of `table`'s readings block as text (a blank line first), or
    none where no entry has readings."""
    if not _with_readings(table):
        return []
    shown = {name: [_reading(row["tasks"][t.name]) for t in TASKS]
             for name, row in table["systems"].items()}
    width = 2 + max(len(cell) for cells in shown.values() for cell in cells)
    return ["", READINGS, f"{'':20s}" + "".join(
        f"{t.label + ' (~' + t.paper_column + ')':>{width}s}" for t in TASKS)] + [
        f"{table['systems'][name]['label']:20s}" + "".join(f"{cell:>{width}s}" for cell in cells)
        for name, cells in shown.items()]


def readings_markdown(table):
    """The lines of `table`'s readings block as Markdown (a blank line
    first): the sentence, then a row per system; none where no entry has
    readings."""
    if not _with_readings(table):
        return []
    return ["", READINGS, "", "| | " + " | ".join(
        f"{t.label} (~{t.paper_column})" for t in TASKS) + " |",
        "|---" * (len(TASKS) + 1) + "|"] + [
        f"| {row['label']} | " + " | ".join(_reading(row["tasks"][t.name]) for t in TASKS) + " |"
        for row in table["systems"].values()]

"""The miniature Tables 5 and 1, the statistics and the committed results:
intervals, paired differences and verdicts on known inputs, every committed
JSON recomputed to its verdicts and its tables on the results pages,
the runs across pretraining seeds and side by side, and the span-QA
diagnosis's variants and its reading of a run."""

import json
import os

import numpy as np
import pytest
from conftest import make_inputs

from keras_bert_impl import BertBackbone
from keras_bert_impl.bert.bert_bilstm_backbone import BertBiLstmBackbone


def test_intervals_paired_differences_and_verdicts():
    """The statistics on numbers worked by hand: t(0.975, 2) = 4.302653 and
    t(0.975, 4) = 2.776445."""
    from training.ablation.stats import cell_interval
    from training.ablation.stats import paired_difference
    from training.ablation.stats import verdict

    stats = cell_interval([70.0, 72.0, 74.0])
    assert stats["mean"] == 72.0 and stats["std"] == 2.0 and stats["n"] == 3
    half = 4.302653 * 2.0 / 3 ** 0.5
    assert stats["low"] == pytest.approx(72.0 - half, abs=1e-5)
    assert stats["high"] == pytest.approx(72.0 + half, abs=1e-5)
    assert cell_interval([5.0])["low"] is None and cell_interval([]) is None
    # Paired: the seeds' shared offsets cancel; unpaired seeds are left out.
    better = {0: 60.0, 1: 70.0, 2: 80.0, 3: 65.0, 4: 75.0, 9: 0.0}
    worse = {0: 59.0, 1: 68.0, 2: 79.0, 3: 63.0, 4: 74.0}
    diff = paired_difference(better, worse)
    assert diff["seeds"] == [0, 1, 2, 3, 4] and diff["mean"] == pytest.approx(1.4)
    std = (sum((d - 1.4) ** 2 for d in (1, 2, 1, 2, 1)) / 4) ** 0.5
    assert diff["low"] == pytest.approx(1.4 - 2.776445 * std / 5 ** 0.5, abs=1e-5)
    assert verdict(diff) == "reproduced"
    assert verdict(paired_difference(worse, better)) == "contradicted"
    assert verdict(paired_difference({0: 1.0, 1: 3.0}, {0: 2.0, 1: 2.0})) == "inconclusive"
    assert verdict(paired_difference({0: 1.0}, {0: 0.0})) == "inconclusive"  # no interval
    assert verdict(paired_difference({0: 1.0}, {})) == "not measured"


def test_committed_results_recompute_to_their_verdicts():
    """docs/results/extended_grid/ (the default run), seed1/ and seed7/ in
    it (the same with --seed=1 and --seed=7), under the extended
    learning-rate grid, the same three under the first grid in
    first_grid/, and Table 5's three
    with span QA on 9,000 rows in span_qa_rows/ (and its scaling stages,
    and Table 1 pretrained again in its three runs): every cell's interval
    and every direction's paired difference and verdict recomputed from the
    seeds' scores in the JSON; every cell's rate is its best on validation;
    and the tables in docs/results/README.md (the current design) and
    earlier_designs.md are the JSON's."""
    from training.ablation.settings import beyond_grid
    from training.ablation.stats import cell_interval
    from training.ablation.stats import paired_difference
    from training.ablation.stats import verdict

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    results = os.path.join(root, "docs", "results")
    # The folder is a map: the two pages and one folder per design (the
    # final design's holds its plan, fixed before it runs).
    assert sorted(os.listdir(results)) == ["README.md", "earlier_designs.md", "extended_grid",
                                           "final_design", "first_grid", "span_qa_rows"]
    assert os.listdir(os.path.join(results, "final_design")) == ["PLAN.md"]
    seed_of = {"": 12345, "seed1": 1, "seed7": 7}
    every = {folder: ("table5", "table1") for folder in seed_of}
    # design folder: (extend_grid, span QA's training rows, the tables run so far)
    designs = {"extended_grid": (2, 2500, every), "first_grid": (0, 2500, every),
               "span_qa_rows": (2, 9000, {folder: ("table5",) for folder in seed_of}),
               # Table 1 under it, pretrained again (span_qa_rows/PLAN.md)
               "span_qa_rows/repretrained": (2, 9000, {folder: ("table1",) for folder in seed_of}),
               # Table 5's command timed from a fresh folder (a fourth pretraining run)
               "span_qa_rows/timed": (2, 9000, {"": ("table5",)}),
               "span_qa_rows/scaling": (2, 9000, {"": tuple(sorted(
                   name[:-5] for name in os.listdir(os.path.join(results, "span_qa_rows",
                                                                 "scaling"))))})}
    for design, (extend, span_rows, done) in designs.items():
        for folder, names in done.items():
            for name in names:
                table = json.load(open(os.path.join(results, design, folder, f"{name}.json")))
                settings = table["settings"]
                assert settings["seed"] == seed_of[folder]
                assert settings.get("extend_grid", 0) == extend
                assert settings.get("span_qa_num_train", settings["num_train"]) == span_rows
                assert table["errors"] == []
                grid = [float(r) for r in settings["learning_rates"].split(",")]
                seeds = {}
                for system, row in table["systems"].items():
                    for task, entry in row["tasks"].items():
                        if "na" in entry:
                            continue
                        scores = {s["seed"]: s["score"] for s in entry["seeds"]}
                        assert len(scores) == settings["seeds"] == 5, (system, task)
                        assert entry["interval"] == pytest.approx(
                            cell_interval(list(scores.values())))
                        seeds[system, task] = scores
                        # The rate is the best tried, and the rule tried no more.
                        tried = {float(r): v for r, v in entry["selection"].items()}
                        best = max(sorted(tried), key=tried.get)
                        assert entry["learning_rate"] == best, (system, task)
                        assert beyond_grid(grid, list(tried), best, extend) is None
                for direction in table["directions"]:
                    for task, found in direction["here"].items():
                        diff = paired_difference(seeds.get((direction["better"], task), {}),
                                                 seeds.get((direction["worse"], task), {}))
                        assert found["difference"] == pytest.approx(diff)
                        assert found["verdict"] == verdict(diff)
    # The scaling plot's numbers are its committed stages'.
    from training.ablation.scaling import build_scaling
    from training.ablation.settings import AblationsConfig

    rows = os.path.join(results, "span_qa_rows")
    assert build_scaling(AblationsConfig(output_dir=rows)) == json.load(
        open(os.path.join(rows, "scaling.json")))
    from training.ablation.table import format_markdown
    from training.ablation.table import format_runs_side_by_side

    def tables(folder):
        return [json.load(open(os.path.join(results, "extended_grid", folder, f"{name}.json")))
                for name in ("table5", "table1")]

    # The earlier designs' page shows the extended grid's runs; the results
    # page the current design's (span QA on more rows).
    earlier = open(os.path.join(results, "earlier_designs.md"), encoding="utf-8").read()
    page = open(os.path.join(results, "README.md"), encoding="utf-8").read()
    assert format_markdown(*tables("")) in earlier
    for default, second, third in zip(tables(""), tables("seed1"), tables("seed7")):
        assert format_runs_side_by_side([("--seed=12345 (default)", default),
                                         ("--seed=1", second), ("--seed=7", third)]) in earlier
    rows = [(f"--seed={seed_of[folder]}" + (" (default)" if not folder else ""),
             json.load(open(os.path.join(results, "span_qa_rows", folder, "table5.json"))))
            for folder in designs["span_qa_rows"][2]]
    assert format_runs_side_by_side(rows) in page
    assert format_markdown(rows[0][1], None) in page
    assert format_markdown(None, json.load(open(os.path.join(
        results, "span_qa_rows", "repretrained", "table1.json")))) in page
    again = [(f"--seed={seed_of[folder]}" + (" (default)" if not folder else ""),
              json.load(open(os.path.join(results, "span_qa_rows", "repretrained", folder,
                                          "table1.json")))) for folder in seed_of]
    assert format_runs_side_by_side(again) in page


def test_across_runs_intervals_over_pretraining_runs(tmp_path):
    """`training.ablation.across_runs` on the committed default and --seed=1
    runs: each cell and direction is the t interval over the two runs' means
    (t(0.975, 1) = 12.706205), each run's own verdict tallied; runs whose
    settings differ in more than the seed are refused; the command writes
    extended_grid/across_runs/ as committed, and so each other design's
    across_runs/ (Table 5's, and Table 1's pretrained again)."""
    from training.ablation.across_runs import combine
    from training.ablation.across_runs import format_markdown
    from training.ablation.across_runs import read_runs

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    results = os.path.join(root, "docs", "results")
    extended = os.path.join(results, "extended_grid")
    runs = read_runs([extended, os.path.join(extended, "seed1")], "table5")
    combined = combine(runs)
    (_, a), (_, b) = runs
    bert_a = a["systems"]["bert"]["tasks"]["span_qa"]["interval"]["mean"]
    bert_b = b["systems"]["bert"]["tasks"]["span_qa"]["interval"]["mean"]
    cell = combined["systems"]["bert"]["tasks"]["span_qa"]
    assert cell["runs"] == [bert_a, bert_b]
    half = 12.706205 * abs(bert_a - bert_b) / 2
    assert cell["interval"]["low"] == pytest.approx((bert_a + bert_b) / 2 - half, abs=1e-4)
    pair = next(d for d in combined["directions"] if (d["better"], d["worse"]) == (
        "bert", "random"))["here"]["answer_sentence"]
    d_a, d_b = (next(d for d in t["directions"] if (d["better"], d["worse"]) == (
        "bert", "random"))["here"]["answer_sentence"]["difference"]["mean"] for t in (a, b))
    assert pair["runs"] == [d_a, d_b] and pair["run_verdicts"] == ["reproduced"] * 2
    assert pair["difference"]["mean"] == pytest.approx((d_a + d_b) / 2)
    assert pair["verdict"] == ("reproduced" if (d_a + d_b) / 2 > 12.706205 * abs(d_a - d_b) / 2
                               else "inconclusive")
    assert combined["systems"]["random"]["tasks"]["topic"]["runs"][0] is not None
    # Only the seed may differ.
    other = tmp_path / "other"
    other.mkdir()
    changed = dict(b, settings={**b["settings"], "seed": 99, "num_train": 100})
    (other / "table5.json").write_text(json.dumps(changed))
    with pytest.raises(ValueError, match="setting num_train=100"):
        read_runs([extended, str(other)], "table5")
    (other / "table5.json").write_text(json.dumps(a))
    with pytest.raises(ValueError, match="both seed 12345"):
        read_runs([extended, str(other)], "table5")
    # The command's folder is swapped in whole; a folder holding anything it
    # did not write (a run's own table5.json) is refused and left as it was.
    from training.ablation.across_runs import write_combined

    written = tmp_path / "across"
    write_combined(str(written), {"table5": combined})
    write_combined(str(written), {"table5": combined})
    assert sorted(os.listdir(written)) == ["table5.json", "tables.md"]
    assert sorted(os.listdir(tmp_path)) == ["across", "other"]
    with pytest.raises(ValueError, match=f"--output_dir={other} holds table5.json, which "
                                         "across_runs did not write"):
        write_combined(str(other), {"table5": combined})
    assert json.load(open(other / "table5.json")) == a
    # Each design's committed combination is the one its runs give; the
    # earlier designs' page shows the extended grid's and the two grids side
    # by side, the results page the current design's.
    from training.ablation.across_runs import format_designs_side_by_side

    earlier = open(os.path.join(results, "earlier_designs.md"), encoding="utf-8").read()
    page = open(os.path.join(results, "README.md"), encoding="utf-8").read()
    for name in ("table5", "table1"):
        designs = []
        for design in ("extended_grid", "first_grid"):
            folder = os.path.join(results, design, "across_runs")
            committed = json.load(open(os.path.join(folder, f"{name}.json")))
            folders = [os.path.join(root, r["folder"]) for r in committed["runs"]]
            prefix = os.path.normpath(os.path.join(results, design))
            assert len(folders) == 3 and all(
                os.path.normpath(f) == prefix or os.path.dirname(os.path.normpath(f)) == prefix
                for f in folders), folders
            combined = combine(read_runs(folders, name))
            text = format_markdown(name, combined)
            assert text in open(os.path.join(folder, "tables.md"), encoding="utf-8").read()
            if design == "extended_grid":
                assert text in earlier
            designs.append((design, combined))
            if name == "table5" and design == "extended_grid":  # and span QA on 9,000 rows' three runs
                folder = os.path.join(results, "span_qa_rows", "across_runs")
                committed = json.load(open(os.path.join(folder, "table5.json")))
                text = format_markdown(name, combine(read_runs(
                    [os.path.join(root, r["folder"]) for r in committed["runs"]], name)))
                assert len(committed["runs"]) == 3 and text in page
                assert text in open(os.path.join(folder, "tables.md"), encoding="utf-8").read()
            if name == "table1" and design == "extended_grid":  # and its Table 1, pretrained again
                folder = os.path.join(results, "span_qa_rows", "repretrained", "across_runs")
                committed = json.load(open(os.path.join(folder, "table1.json")))
                text = format_markdown(name, combine(read_runs(
                    [os.path.join(root, r["folder"]) for r in committed["runs"]], name)))
                assert len(committed["runs"]) == 3 and text in page
                assert text in open(os.path.join(folder, "tables.md"), encoding="utf-8").read()
        assert format_designs_side_by_side(
            [("first grid", designs[1][1]), ("extended grid", designs[0][1])]) in earlier
    # The front door's results table is the current design's Table 5 rows
    # across the runs.
    readme = open(os.path.join(root, "README.md"), encoding="utf-8").read()
    current = os.path.join(results, "span_qa_rows")
    table5 = format_markdown("table5", combine(read_runs(
        [os.path.join(current, f) for f in ("", "seed1", "seed7")], "table5")))
    rows = [line for line in table5.splitlines()[4:] if line.startswith("| ")][:5]
    assert rows and all(row in readme for row in rows), rows
    # and its Table 1 sentence the three pretrained-again runs' differences.
    from training.ablation.across_runs import _interval

    table1 = json.load(open(os.path.join(current, "repretrained", "across_runs", "table1.json")))
    said = " ".join(readme.split())
    for better, worse, task in (("bert", "gpt", "answer_sentence"), ("bert", "elmo", "topic"),
                                ("bert", "elmo", "answer_sentence")):
        found = next(d for d in table1["directions"] if (d["better"], d["worse"]) == (
            better, worse))["here"][task]
        assert _interval(found["difference"]) in said, (better, worse, task)


def test_runs_side_by_side_give_each_direction_in_each_run():
    """Each direction's row shows every run's (or design's) finding for its
    task, including two directions between the same pair of systems."""
    from training.ablation.table import format_runs_side_by_side

    def table(mean, low, high, verdict):
        found = {"difference": {"mean": mean, "low": low, "high": high}, "verdict": verdict}
        return {"directions": [
            {"better": "no_nsp", "worse": "ltr", "robust": True, "here": {"span_qa": found}},
            {"better": "no_nsp", "worse": "ltr", "robust": False, "here": {"topic": found}}]}

    text = format_runs_side_by_side([("a", table(2.0, 1.0, 3.0, "reproduced")),
                                     ("b", table(-1.0, -3.0, 1.0, "inconclusive"))])
    assert text.splitlines() == [
        "| Direction | task | a | b |", "|---|---|---|---|",
        "| No NSP > LTR & No NSP (robust) | span QA | +2.0 [+1.0, +3.0] reproduced | "
        "-1.0 [-3.0, +1.0] inconclusive |",
        "| No NSP > LTR & No NSP | topic | +2.0 [+1.0, +3.0] reproduced | "
        "-1.0 [-3.0, +1.0] inconclusive |"]
    # Across runs, designs side by side: the same rows, each direction found
    # by its pair of systems and its task.
    from training.ablation.across_runs import format_designs_side_by_side

    designs = format_designs_side_by_side([("a", table(2.0, 1.0, 3.0, "reproduced")),
                                           ("b", table(-1.0, -3.0, 1.0, "inconclusive"))])
    assert designs == text


def test_span_qa_diagnosis_wraps_the_encoders_and_reads_the_runs_cells(tmp_path):
    """`training.ablation.span_qa_diagnosis`: each variant's encoder is the
    one its docstring names (a BiLSTM over the bidirectional encoder; the
    encoder frozen, without dropout, computing what it computed); a causal
    encoder is refused, and so are a --run without a run's settings and an
    output folder holding files it did not write. Each committed diagnosis reads the table's own validation cells
    from its run's JSON, and its table is the JSON's, in
    docs/results/earlier_designs.md too."""
    from keras_bert_impl import preset
    from training.ablation.span_qa_diagnosis import VARIANTS
    from training.ablation.span_qa_diagnosis import check_output_dir
    from training.ablation.span_qa_diagnosis import render
    from training.ablation.span_qa_diagnosis import wrap_backbone

    encoder = BertBackbone.from_bert_config(preset("tiny"))
    inputs = make_inputs(batch=2, seq=12)
    bilstm = wrap_backbone("bert_bilstm", encoder)
    assert isinstance(bilstm, BertBiLstmBackbone) and bilstm.backbone is encoder
    assert not bilstm.causal and bilstm.trainable_weights
    frozen = wrap_backbone("bert_frozen_linear", encoder)
    assert frozen.trainable_weights == [] and frozen is not encoder
    assert frozen.bert_config.hidden_dropout_prob == 0.0
    assert frozen.bert_config.attention_probs_dropout_prob == 0.0
    np.testing.assert_allclose(frozen(inputs, training=True)["sequence_output"],
                               encoder(inputs, training=False)["sequence_output"], atol=1e-6)
    with pytest.raises(ValueError, match="bidirectional"):
        wrap_backbone("bert_bilstm", BertBackbone.from_bert_config(preset("tiny"), causal=True))
    # A --run without a run's settings is refused by name; one with them is read.
    from training.ablation.span_qa_diagnosis import read_run

    with pytest.raises(ValueError, match=f"--run={tmp_path}: no {tmp_path}/settings.json"):
        read_run(str(tmp_path))
    (tmp_path / "settings.json").write_text(json.dumps({"seed": 7, "num_train": 100}))
    cfg = read_run(str(tmp_path))
    assert (cfg.seed, cfg.num_train, cfg.output_dir) == (7, 100, str(tmp_path))
    os.remove(tmp_path / "settings.json")
    # Its output folder is replaced whole: one holding anything else is refused.
    check_output_dir(str(tmp_path / "new"))
    (tmp_path / "diagnosis.md").write_text("")
    check_output_dir(str(tmp_path))
    (tmp_path / "table5.json").write_text("{}")
    with pytest.raises(ValueError, match="holds 'table5.json', which this command did not"):
        check_output_dir(str(tmp_path))

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    results = os.path.join(root, "docs", "results")
    page = open(os.path.join(results, "earlier_designs.md"), encoding="utf-8").read()
    committed = sorted(os.listdir(os.path.join(results, "first_grid", "span_qa_diagnosis")))
    assert "seed7" in committed
    for seed in committed:  # seed7/ (the pre-registered one), seed1/
        folder = os.path.join(results, "first_grid", "span_qa_diagnosis", seed)
        diagnosis = json.load(open(os.path.join(folder, "diagnosis.json")))
        assert f"seed{diagnosis['seed']}" == seed and set(diagnosis["variants"]) == set(VARIANTS)
        # It ran on the first grid's runs (before the grid was extended).
        tables = [json.load(open(os.path.join(results, "first_grid", seed, f"{name}.json")))
                  for name in ("table5", "table1")]
        for name, scores in diagnosis["table"].items():
            selection = next(t["systems"][name]["tasks"]["span_qa"]["selection"]
                             for t in tables if name in t["systems"])
            assert scores == pytest.approx(selection), (seed, name)
        assert "bert_features" in diagnosis["table"]
        table = render(diagnosis)
        assert open(os.path.join(folder, "diagnosis.md")).read() == table
        assert table in page, seed

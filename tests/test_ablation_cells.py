"""One fine-tuning run of Table 5's final design (`training.ablation.cells`):
its config, its scores read off the run's summary, and the refusal of an
earlier design's run in the folder."""

import os


def test_each_run_early_stops_on_validation_and_reads_dev_once(tmp_path):
    """The final design's fine-tuning configs: every run early-stops
    (patience 3) up to its task's cap; a selection run reads select/ only
    (its dev is the validation rows), a reported run trains on the task's
    folder, watches select/'s validation rows and reads dev once. A
    finished run of another design in the folder is refused, naming it."""
    from training.ablation import cells
    from training.ablation.settings import AblationsConfig
    from training.ablation.systems import SYSTEMS
    from training.ablation.systems import TASKS

    cfg = AblationsConfig(output_dir=str(tmp_path))
    bert = next(s for s in SYSTEMS if s.name == "bert")
    caps = {t.name: t.epochs for t in TASKS}
    assert caps == {"topic": 10, "answer_sentence": 10, "span_qa": 16}
    for task in TASKS:
        select = cells._finetune_config(cfg, bert, task, "select", 1e-4, 5, "f")
        dev = cells._finetune_config(cfg, bert, task, "dev", 1e-4, 0, "f")
        tasks = os.path.join(str(tmp_path), "tasks", task.name)
        assert (select.data_dir, select.validation_data_dir) == (os.path.join(tasks, "select"),
                                                                 "")
        assert (dev.data_dir, dev.validation_data_dir) == (tasks, os.path.join(tasks, "select"))
        assert {select.early_stopping_patience, dev.early_stopping_patience} == {3}
        assert select.epochs == dev.epochs == caps[task.name]
        assert select.seed == cfg.seed + 6
    span = next(t for t in TASKS if t.name == "span_qa")
    summary = {"config": {"epochs": 16, "early_stopping_patience": 3, "learning_rate": 1e-4,
                          "seed": cfg.seed + 1},
               "history": {"loss": [2.0, 1.0, 0.9, 0.8], "validation_f1": [40.0, 80.0, 79.0,
                                                                            78.0]},
               "monitor": "validation_f1", "best_epoch": 2, "epochs_trained": 4,
               "stopped_early": False, "scores": {"dev_f1": 75.0, "dev_exact_match": 60.0}}
    score = cells._score(span, summary, 0)
    assert score["score"] == 75.0 and score["exact_match"] == 60.0
    assert score["validation"] == 80.0 and score["best_epoch"] == 2
    assert score["converged"] is False
    assert score["curve"][1] == {"epoch": 2, "loss": 1.0, "validation": 80.0}
    ft = cells._finetune_config(cfg, bert, span, "dev", 1e-4, 0, "f")
    assert cells._other_run(summary, ft, "f") is None
    old = {**summary, "config": {**summary["config"], "epochs": 6,
                                 "early_stopping_patience": 0}}
    assert "f holds a run with epochs=6, where this design runs 16" in cells._other_run(
        old, ft, "f")

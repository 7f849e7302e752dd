"""Progress lines (rate, ETA), the training log's line and the training curves.

(The lines of each family's vocabulary and data steps: `tests/test_data_progress.py`.)
"""

import math

import numpy as np
import pytest

from tf_records.command_line.progress import Progress
from tf_records.command_line.progress import Timed
from tf_records.command_line.progress import batch_progress
from tf_records.command_line.progress import eta_seconds
from tf_records.command_line.progress import format_duration


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_duration_and_eta_math():
    assert [format_duration(s) for s in (0, 59.4, 61, 3599, 3600, 3 * 3600 + 62)] == [
        "0:00", "0:59", "1:01", "59:59", "1:00:00", "3:01:02"]
    assert format_duration(None) == format_duration(math.inf) == "?"
    assert eta_seconds(30, 120, 3.0) == 30.0
    assert eta_seconds(130, 120, 3.0) == 0.0  # past the total: nothing left
    assert eta_seconds(30, None, 3.0) is None and eta_seconds(30, 120, 0.0) is None


def test_progress_rate_and_eta_leave_out_the_first_item():
    """The first item (tracing, worker start-up) took 20 s, the next 60 took
    30 s: 2 items/s, so 40 left -> 20 s, not the 61-items-in-50-s rate's 33 s."""
    clock, lines = Clock(), []
    progress = Progress("Scoring", total=101, unit="batches", every_seconds=10,
                        print_fn=lambda text, flush: lines.append(text), clock=clock)
    clock.now += 20
    # Only the start to measure from yet: 1 item in 20 s.
    assert progress.update(1) == "Scoring: 1/101 batches (1%)  0.05 batches/s  ETA 33:20"
    clock.now += 30
    line = progress.update(61, loss=0.25)
    assert line == "Scoring: 61/101 batches (60%)  2 batches/s  ETA 0:20  loss 0.25"
    clock.now += 5
    assert progress.update(71) is None  # 5 s since the last line
    clock.now += 15
    progress.update(101)
    assert lines[-1].startswith("Scoring: 101/101 batches (100%)") and "ETA 0:00" in lines[-1]
    assert progress.finish() == "Scoring: 101/101 batches in 1:10 (1.44 batches/s)"


def test_progress_scale_unknown_total_and_iterate():
    clock, lines = Clock(), []
    progress = Progress("Writing train instances", total=None, unit="MB", scale=1e-6,
                        every_seconds=0, print_fn=lambda text, flush: lines.append(text),
                        clock=clock)
    clock.now += 1
    progress.update(1_000_000)
    clock.now += 2
    progress.update(5_000_000, documents=120, instances=3400)
    assert lines[-1] == ("Writing train instances: 5 MB  2 MB/s  documents 120  "
                         "instances 3,400")  # no total, no ETA
    counted = Progress("Counting", every_seconds=1e9, print_fn=lambda *a, **k: None, clock=clock)
    assert list(counted.iterate(["ab", "cde"], size=len)) == ["ab", "cde"]
    assert counted.done == 5 and not counted.printed


def test_timed_and_batch_progress_lines():
    lines = []
    with Timed("Exporting", print_fn=lambda text, flush: lines.append(text)):
        pass
    assert lines[0] == "Exporting ..." and lines[1].startswith("Exporting: done in ")
    lines.clear()
    callback = batch_progress("Held-out evaluation", total=3, every_seconds=0,
                              print_fn=lambda text, flush: lines.append(text))
    callback.on_test_begin()
    for batch in range(3):
        callback.on_test_batch_end(batch, {"loss": 1.5 - batch / 10})
    callback.on_test_end()
    assert lines[0].startswith("Held-out evaluation: 1/3 batches (33%)") and "loss 1.5" in lines[0]
    assert lines[-1].startswith("Held-out evaluation: 3/3 batches in ")
    quiet = []
    callback = batch_progress("Scoring", total=3, print_fn=lambda text, flush: quiet.append(text))
    callback.on_predict_begin()
    callback.on_predict_batch_end(0)
    callback.on_predict_end()
    assert quiet == []  # a pass quicker than every_seconds prints nothing


def test_training_log_line_has_examples_per_second_and_eta(tmp_path):
    """The line keeps its start ("step N/T  loss ...") and adds other
    accuracies, the rate and the ETA; TensorBoard gets the same scalars,
    which `training_curves.png` draws with the held-out points."""
    import keras

    from training.run.curves import write_heldout_scalars
    from training.run.curves import write_training_curves
    from training.run.train_log import TrainingLog

    class Model:
        optimizer = keras.optimizers.SGD(learning_rate=0.5)

    lines = []
    log = TrainingLog(total_steps=6, first_step=0, steps_per_epoch=3, every_steps=2,
                      sequences_per_step=4, tokens_per_step=4 * 16, log_dir=str(tmp_path),
                      print_fn=lambda text, flush: lines.append(text), rate_label="ex/s")
    log.set_model(Model())
    log.on_train_begin()
    # Each batch's loss; fit's logs hold their running mean since the epoch
    # began. The curve must show the mean of each logging interval (2.5,
    # 0.95, 0.3), not the running means that restart with every epoch.
    losses = [3.0, 2.0, 1.0, 0.9, 0.5, 0.1]
    for epoch in range(2):
        log.on_epoch_begin(epoch)
        for batch in range(3):
            so_far = losses[3 * epoch:3 * epoch + batch + 1]
            log.on_train_batch_end(batch, {"loss": sum(so_far) / len(so_far),
                                           "accuracy": 0.25})
    assert [line.split("  ")[0] for line in lines] == ["step 2/6", "step 4/6", "step 6/6"]
    assert lines[0].split("  ")[1:3] == ["loss 2.5000", "accuracy 0.250"]
    assert " ex/s " in lines[0] and lines[-1].endswith("ETA 0:00")
    log.writer.close()
    assert write_heldout_scalars(str(tmp_path), 6, {
        "loss": 0.7, "masked_lm_accuracy": 0.4, "baseline_masked_lm_accuracy": 0.1,
        "heldout_masked_tokens": 99}) == {"loss": 0.7, "masked_lm_accuracy": 0.4}
    lm = write_heldout_scalars(str(tmp_path), 6, {"perplexity": math.e ** 2}, run="lm")
    assert lm == {"loss": pytest.approx(2.0)}  # ln(perplexity): the LM's loss
    path, series = write_training_curves(str(tmp_path))
    assert open(path, "rb").read(4) == b"\x89PNG"
    steps, values = series["loss"]["train"]
    assert steps == [2, 4, 6]
    np.testing.assert_allclose(values, [2.5, 0.95, 0.3], rtol=1e-6)
    assert series["loss"]["heldout"] == ([6], [pytest.approx(0.7)])
    assert series["accuracy"]["heldout masked_lm_accuracy"] == ([6], [pytest.approx(0.4)])
    assert series["accuracy"]["train accuracy"][0] == [2, 4, 6]
    assert "train learning_rate" not in series["accuracy"]  # schedule, not a score

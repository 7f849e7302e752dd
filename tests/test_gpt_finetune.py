"""GPT's fine-tuning entry point (`training/gpt/finetune.py`): end to end
on an MRPC-layout folder, the task readers' encodings, the backbone from
checkpoints, and the flags and vocabularies it refuses."""

import csv
import json
import os

import keras
import numpy as np
import pytest
from gpt_cases import C
from gpt_cases import grown_backbone  # noqa: F401 (the `backbone` fixture)

from keras_bert_impl.gpt import GptBackbone
from keras_bert_impl.gpt import GptConfig
from keras_bert_impl.gpt.gpt_inputs import FineTuningIds
from keras_bert_impl.gpt.gpt_task_models import GptClassifier
from keras_bert_impl.gpt.gpt_task_models import GptTokenTagger

DATA = os.path.join(os.path.dirname(__file__), "data")


def _mrpc_folder(tmp_path, rows=40):
    """An MRPC-layout folder: paraphrase pairs (label 1) and unrelated pairs (label 0)."""
    rng = np.random.default_rng(9)
    words = ("the cat dog sat ran on a mat park big small red blue quickly slowly man woman "
             "saw ate bread apple house car tree").split()
    folder = tmp_path / "MRPC"
    folder.mkdir()
    header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    for split, count in (("train", rows), ("dev", 12)):
        lines = [header]
        for i in range(count):
            first = " ".join(rng.choice(words, rng.integers(4, 9)))
            label = i % 2
            second = first if label else " ".join(rng.choice(words, rng.integers(4, 9)))
            lines.append(f"{label}\t{i}\t{i + 1000}\t{first} .\t{second} .\n")
        (folder / f"{split}.tsv").write_text("".join(lines), encoding="utf-8")
    (folder / "test.tsv").write_text(
        "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n0\t1\t2\tthe cat sat .\ta cat sat .\n"
        "1\t3\t4\tthe big car .\tthe man ran .\n", encoding="utf-8")
    return folder


def _bpe_folder(tmp_path, data_dir):
    from keras_bert_impl.gpt.bpe_learner import learn_bpe
    from keras_bert_impl.gpt.bpe_learner import write_bpe_files

    lines = [line for split in ("train", "dev")
             for line in (data_dir / f"{split}.tsv").read_text(encoding="utf-8").splitlines()]
    vocab, merges = learn_bpe(lines, vocab_size=120)
    return write_bpe_files(vocab, merges, str(tmp_path / "bpe"))


def test_finetune_gpt_end_to_end(tmp_path):
    from keras_bert_impl.gpt.gpt_tokenizer import GptTokenizer
    from training.finetune import FinetuneConfig
    from training.finetune import run

    data_dir = _mrpc_folder(tmp_path)
    vocab_file, merges_file = _bpe_folder(tmp_path, data_dir)
    out = tmp_path / "out"
    summary = run(FinetuneConfig(model="gpt", task="glue/mrpc", data_dir=str(data_dir),
                                 output_dir=str(out), preset="gpt_tiny", vocab_file=vocab_file,
                                 max_seq_length=40, epochs=1, batch_size=8))
    config = summary["config"]
    assert config["merges_file"] == merges_file  # found beside vocab.json
    assert (config["learning_rate"], config["warmup_proportion"], config["lm_coef"]) == (
        6.25e-5, 0.002, 0.5)
    history = summary["history"]
    assert summary["train_rows"] == 40
    assert {"loss", "lm_loss", "accuracy", "dev_f1", "dev_accuracy"} <= set(history)
    assert history["loss"][0] > 0.5 * history["lm_loss"][0]  # L3 = L2 + 0.5 L1
    rows = list(csv.reader(open(out / "dev_predictions.tsv"), delimiter="\t"))
    assert rows[0] == ["guid", "prediction", "label"] and len(rows) == 13
    assert {r[1] for r in rows[1:]} <= {"0", "1"}
    submission = list(csv.reader(open(out / "glue_submission" / "MRPC.tsv"), delimiter="\t"))
    assert submission[0] == ["index", "prediction"] and len(submission) == 3
    assert json.load(open(out / "summary.json"))["history"]["dev_f1"] == history["dev_f1"]
    model = keras.saving.load_model(str(out / "export" / "model.keras"))
    # The SavedModel serves the task logits on the both-orders ids.
    import tensorflow as tf

    serving = tf.saved_model.load(str(out / "export" / "saved_model"))
    ids = np.zeros((2, 2, 9), "int32")
    ids[:, :, :5] = [[[5, 7, 9, 11, model.classify_id]] * 2] * 2
    x = {"input_word_ids": ids, "input_mask": (ids > 0).astype("int32")}
    served = serving.signatures["serving_default"](**{k: tf.constant(v) for k, v in x.items()})
    np.testing.assert_allclose(served["logits"].numpy(), model.predict(x, verbose=0), atol=1e-5)
    tokenizer = GptTokenizer(vocab_file, merges_file)
    assert isinstance(model, GptClassifier) and model.similarity  # MRPC: both orders
    assert model.classify_id == tokenizer.classify_token_id == tokenizer.vocab_size + 2
    assert model.backbone.vocab_size == tokenizer.vocab_size + 3


def test_gpt_encodings_of_the_task_readers(tmp_path):
    """SWAG, NER and an entailment GLUE task through `make_task`, with a stand-in tokenizer."""
    from training.finetune import FinetuneConfig
    from training.gpt.finetune import make_gpt_task as make_task

    class Words:
        vocab_size = 50

        def encode(self, text):
            return [sum(map(ord, w)) % 49 + 1 for w in text.lower().split()]

    special = FineTuningIds.appended_to(50)
    cfg = FinetuneConfig(model="gpt", task="swag", data_dir=os.path.join(DATA, "swag"),
                         max_seq_length=24, lm_coef=0.5)
    x, y, _ = make_task(cfg, Words()).train_arrays()
    ids = x["input_word_ids"]
    assert ids.shape[1:] == (4, 24) and len(y) == len(ids)
    assert (ids[..., 0] == special.start).all()
    assert ((ids == special.delimiter).sum(-1) == 1).all()
    assert ((ids == special.classify).sum(-1) == 1).all()

    conll = tmp_path / "conll"
    conll.mkdir()
    (conll / "train.txt").write_text(open(os.path.join(DATA, "conll", "eng_sample.txt")).read())
    task = make_task(FinetuneConfig(model="gpt", task="ner", data_dir=str(conll),
                                    max_seq_length=16, lm_coef=0.5), Words())
    x, y, weights = task.train_arrays()
    assert set(x) == {"input_word_ids", "input_mask"}  # no segments for GPT
    lengths = x["input_mask"].sum(1)
    assert (x["input_word_ids"][:, 0] == special.start).all()
    assert (x["input_word_ids"][np.arange(len(lengths)), lengths - 1] == special.classify).all()
    assert weights.sum() > 0 and isinstance(task.build_model(GptBackbone.from_config_object(
        GptConfig(vocab_size=53, n_positions=16, n_embd=12, n_layer=1, n_head=3))),
        GptTokenTagger)

    rte = tmp_path / "RTE"
    rte.mkdir()
    (rte / "train.tsv").write_text("index\tsentence1\tsentence2\tlabel\n"
                                   "0\tA man eats .\tSomeone eats .\tentailment\n")
    task = make_task(FinetuneConfig(model="gpt", task="glue/rte", data_dir=str(rte),
                                    max_seq_length=10, lm_coef=0.5), Words())
    x, y, _ = task.train_arrays()
    assert not task.similarity and x["input_word_ids"].shape == (1, 10)
    ids = x["input_word_ids"][0].tolist()
    assert ids[0] == special.start and ids[5] == special.delimiter and ids[9] == special.classify


def test_gpt_backbone_from_checkpoints(backbone, tmp_path):
    """A Hugging Face folder gets the three rows; a fine-tuned `.keras` has them already."""
    from keras_bert_impl.gpt import load_gpt_checkpoint
    from training.finetune import FinetuneConfig
    from training.gpt.finetune import build_gpt_backbone

    folder = os.path.join(os.path.dirname(__file__), "goldens", "gpt_parity")  # vocab 99
    grown = build_gpt_backbone(FinetuneConfig(model="gpt", init_checkpoint=folder), 99)
    original = load_gpt_checkpoint(folder)
    assert grown.vocab_size == 102
    np.testing.assert_array_equal(np.asarray(grown.token_embedding.embeddings)[:99],
                                  np.asarray(original.token_embedding.embeddings))
    path = str(tmp_path / "fine_tuned.keras")
    GptClassifier(backbone, 2, C).save(path)
    again = build_gpt_backbone(FinetuneConfig(model="gpt", init_checkpoint=path), 99)
    assert again.vocab_size == 102
    with pytest.raises(SystemExit, match="has 102 token rows"):
        build_gpt_backbone(FinetuneConfig(model="gpt", init_checkpoint=path), 60)


@pytest.mark.parametrize("changes, message", [
    (dict(model="t5"), "--model='t5' is not one of"),
    (dict(model="gpt", task="squad"), "squad is BERT's only"),
    (dict(model="gpt"), "needs --init_checkpoint"),
    (dict(model="gpt", preset="tiny"), "not a GPT preset"),
    (dict(model="gpt", preset="gpt_tiny"), "No vocab.json"),
    (dict(lm_coef=0.5, preset="tiny"), "are GPT's"),
])


def test_finetune_gpt_refuses_clearly(tmp_path, changes, message):
    from training.finetune import FinetuneConfig
    from training.finetuning.config import resolve

    cfg = FinetuneConfig(**{"task": "glue/rte", "data_dir": str(tmp_path), **changes})
    with pytest.raises(SystemExit, match=message):
        resolve(cfg)


def test_bert_defaults_unchanged(tmp_path):
    from training.finetune import FinetuneConfig
    from training.finetuning.config import resolve

    cfg = resolve(FinetuneConfig(task="glue/rte", data_dir=str(tmp_path), preset="tiny",
                                 vocab_file="vocab.txt"))
    assert (cfg.model, cfg.learning_rate, cfg.warmup_proportion) == ("bert", 5e-5, 0.1)


def test_a_vocabulary_other_than_the_checkpoints_own_is_refused(tmp_path):
    """A same-size vocab.json or merges.txt from another BPE run would give
    every row ids the checkpoint never learned: refused, naming both files;
    the checkpoint's own files, or identical copies, are taken."""
    from training.finetune import FinetuneConfig
    from training.finetuning.config import resolve

    export = tmp_path / "export"
    export.mkdir()
    (export / "causal_lm.keras").write_bytes(b"")
    (export / "vocab.json").write_text('{"a</w>": 0, "b</w>": 1}')
    (export / "merges.txt").write_text("#version: 0.2\na b\n")
    other = tmp_path / "other"
    other.mkdir()
    (other / "vocab.json").write_text('{"b</w>": 0, "a</w>": 1}')
    (other / "merges.txt").write_text("#version: 0.2\nb a\n")
    cfg = FinetuneConfig(model="gpt", task="glue/cola", data_dir=str(tmp_path),
                         init_checkpoint=str(export / "causal_lm.keras"))
    assert resolve(cfg).vocab_file == str(export / "vocab.json")
    for field, name in (("vocab_file", "vocab.json"), ("merges_file", "merges.txt")):
        changed = FinetuneConfig(**{**cfg.__dict__, field: str(other / name)})
        with pytest.raises(SystemExit, match=rf"--{field}=.*other/{name} \(sha256 \w{{12}}\) "
                                             rf"is not the {name} of --init_checkpoint="):
            resolve(changed)
        (other / f"copy-{name}").write_bytes((export / name).read_bytes())
        same = FinetuneConfig(**{**cfg.__dict__, "vocab_file": str(export / "vocab.json"),
                                 "merges_file": str(export / "merges.txt"),
                                 field: str(other / f"copy-{name}")})
        assert getattr(resolve(same), field) == str(other / f"copy-{name}")

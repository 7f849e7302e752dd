"""OpenAI GPT: Hugging Face parity, checkpoint round trips, causality, tied head."""

import gc
import json
import os
import shutil

import keras
import numpy as np
import pytest
import safetensors.numpy
import tensorflow as tf
from conftest import make_inputs
from helpers import run_backbone_test
from helpers import skip_random_init

from keras_bert_impl import BertBackbone
from keras_bert_impl.bert.load_backbone import load_backbone
from keras_bert_impl.gpt import GptBackbone
from keras_bert_impl.gpt import GptConfig
from keras_bert_impl.gpt import gpt_num_parameters
from keras_bert_impl.gpt import gpt_preset
from keras_bert_impl.gpt import grow_vocabulary
from keras_bert_impl.gpt import load_gpt_checkpoint
from keras_bert_impl.gpt import save_gpt_checkpoint

# A random transformers OpenAIGPTLMHeadModel and its outputs, made by
# tests/goldens/make_gpt_parity.py (vocab 99, 16 positions, width 12, 3 heads).
GOLDEN = os.path.join(os.path.dirname(__file__), "goldens", "gpt_parity")
OUTPUTS = os.path.join(GOLDEN, "outputs.npz")
LM = "transformer."  # OpenAIGPTLMHeadModel's prefix, as the golden folder spells keys


@pytest.fixture
def odd_gpt_config():
    """Odd sizes so that swapped axes fail loudly."""
    return GptConfig(vocab_size=99, n_positions=16, n_embd=12, n_layer=2, n_head=3)


def gpt_inputs(batch=3, seq=7, vocab=99, seed=0, pad_last=2):
    x = make_inputs(batch=batch, seq=seq, vocab=vocab, seed=seed, pad_last=pad_last)
    return {"input_word_ids": x["input_word_ids"], "input_mask": x["input_mask"]}


def randomize(model, seed=0, stddev=0.3):
    """Every weight N(0, stddev): order-one attention scores, so that any
    leak of information between positions shows far above round-off."""
    rng = np.random.default_rng(seed)
    for w in model.weights:
        w.assign(rng.normal(0.0, stddev, w.shape).astype("float32"))
    return model


def outputs_of(model, x):
    return {k: np.asarray(v) for k, v in model(x, training=False).items() if k != "encoder_outputs"}


# === Hugging Face parity and checkpoint files ===


def test_parity_with_transformers():
    """Every block's output, the final state and the logits match transformers.

    Compared at every position, padded ones included: with right padding the
    conventions agree there (a padded query attends, as in transformers, to
    the real keys before it; padded keys are masked in both).
    """
    goldens = np.load(OUTPUTS)
    backbone = load_gpt_checkpoint(GOLDEN)
    x = {"input_word_ids": goldens["input_word_ids"], "input_mask": goldens["input_mask"]}
    assert x["input_mask"].shape == (3, 7) and x["input_mask"].sum(1).tolist() == [5, 7, 7]
    out = backbone(x)
    embeddings = backbone.embeddings(backbone.token_embedding(x["input_word_ids"]))
    pairs = [("embeddings", embeddings), ("sequence_output", out["sequence_output"]),
             ("lm_logits", out["lm_logits"])]
    pairs += [(f"encoder_output_{i}", h) for i, h in enumerate(out["encoder_outputs"])]
    assert len(out["encoder_outputs"]) == 2
    worst = 0.0
    for name, value in pairs:
        assert np.abs(goldens[name]).max() > 0.5, name  # the goldens are not near zero
        diff = float(np.abs(np.asarray(value) - goldens[name]).max())
        worst = max(worst, diff)
        assert diff <= 1e-4, (name, diff)
    print(f"max abs difference vs transformers: {worst:.2e}")


def test_round_trip_writes_what_transformers_writes(tmp_path):
    backbone = load_gpt_checkpoint(GOLDEN)
    (tmp_path / "vocab.json").write_text('{"a": 0}')
    (tmp_path / "merges.txt").write_text("#version: 0.2\n")
    folder = tmp_path / "saved"
    save_gpt_checkpoint(backbone, str(folder),
                        vocab_files=(tmp_path / "vocab.json", tmp_path / "merges.txt"))
    assert sorted(os.listdir(folder)) == ["config.json", "merges.txt", "model.safetensors",
                                          "vocab.json"]  # no temp file left behind
    original = safetensors.numpy.load_file(os.path.join(GOLDEN, "model.safetensors"))
    written = safetensors.numpy.load_file(str(folder / "model.safetensors"))
    assert set(written) == set(original)  # same keys, same (absent) tied head
    for key in original:
        np.testing.assert_array_equal(written[key], original[key], err_msg=key)
    values = json.loads((folder / "config.json").read_text())
    assert values["model_type"] == "openai-gpt"
    assert values["architectures"] == ["OpenAIGPTLMHeadModel"]
    assert (folder / "merges.txt").read_text() == "#version: 0.2\n"
    reloaded = load_gpt_checkpoint(str(folder))
    x = gpt_inputs()
    a, b = backbone(x), reloaded(x)
    for key in ("sequence_output", "lm_logits"):
        np.testing.assert_array_equal(np.asarray(a[key]), np.asarray(b[key]))
    with pytest.raises(ValueError, match="`vocab_files` must be the pair"):
        save_gpt_checkpoint(backbone, str(folder), vocab_files=(tmp_path / "vocab.json",))


def test_loads_mixed_bfloat16():
    goldens = np.load(OUTPUTS)
    backbone = load_gpt_checkpoint(GOLDEN, dtype="mixed_bfloat16")
    x = {"input_word_ids": goldens["input_word_ids"], "input_mask": goldens["input_mask"]}
    logits = backbone(x)["lm_logits"]
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    np.testing.assert_allclose(logits, goldens["lm_logits"], atol=0.15)


def _edited_copy(tmp_path, edit):
    folder = tmp_path / "edited"
    folder.mkdir(parents=True)
    shutil.copy(os.path.join(GOLDEN, "config.json"), folder / "config.json")
    tensors = safetensors.numpy.load_file(os.path.join(GOLDEN, "model.safetensors"))
    edit(tensors)
    safetensors.numpy.save_file(tensors, str(folder / "model.safetensors"))
    return str(folder)


def test_missing_tensor_is_named(tmp_path):
    folder = _edited_copy(tmp_path, lambda t: t.pop(LM + "h.1.mlp.c_fc.bias"))
    with pytest.raises(ValueError, match="lacks tensor 'transformer.h.1.mlp.c_fc.bias'"):
        load_gpt_checkpoint(folder)


@pytest.mark.parametrize("key", [LM + "h.2.ln_1.weight",  # a third block of a 2-block model
                                 "multiple_choice_head.summary.weight",
                                 "h.0.ln_1.weight"])  # unprefixed beside prefixed keys
def test_unexpected_tensor_is_named(tmp_path, key):
    def add(t):
        t[key] = np.ones(12, "float32")
    with pytest.raises(ValueError, match=f"unexpected tensor '{key}'"):
        load_gpt_checkpoint(_edited_copy(tmp_path, add))


def test_misshaped_tensor_is_named_with_both_shapes(tmp_path):
    def edit(t):
        t[LM + "h.0.attn.c_attn.weight"] = t[LM + "h.0.attn.c_attn.weight"].T.copy()
    with pytest.raises(ValueError, match=r"'transformer.h.0.attn.c_attn.weight' has shape "
                                         r"\(36, 12\).*needs \(12, 36\)"):
        load_gpt_checkpoint(_edited_copy(tmp_path, edit))


def test_tied_head_and_old_buffers_accepted(tmp_path):
    """What older transformers stored: `lm_head.weight` (equal to the table),
    each block's causal-mask buffer and `position_ids`; and the keys of a
    plain `OpenAIGPTModel` (no prefix)."""
    expected = load_gpt_checkpoint(GOLDEN).get_weights()

    def old_style(t):
        for key in list(t):
            t[key.removeprefix(LM)] = t.pop(key)
        t["lm_head.weight"] = t["tokens_embed.weight"].copy()
        t["position_ids"] = np.arange(16, dtype=np.int64)
        for i in range(2):
            t[f"h.{i}.attn.bias"] = np.tril(np.ones((16, 16), "float32"))[None, None]
    loaded = load_gpt_checkpoint(_edited_copy(tmp_path, old_style))
    for a, b in zip(expected, loaded.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_untied_head_and_wrong_mask_rejected(tmp_path):
    def untied(t):
        t["lm_head.weight"] = t[LM + "tokens_embed.weight"] + 1.0
    with pytest.raises(ValueError, match="'lm_head.weight' should be tied"):
        load_gpt_checkpoint(_edited_copy(tmp_path / "a", untied))

    def bidirectional(t):
        t[LM + "h.0.attn.bias"] = np.ones((1, 1, 16, 16), "float32")
    with pytest.raises(ValueError, match="'transformer.h.0.attn.bias'.*not a causal mask"):
        load_gpt_checkpoint(_edited_copy(tmp_path / "b", bidirectional))


def test_bert_loader_refuses_gpt_folder():
    with pytest.raises(ValueError, match="OpenAI GPT checkpoint.*load_gpt_checkpoint"):
        load_backbone(GOLDEN)


# === The backbone ===


def test_parameter_counts_of_openai_gpt(monkeypatch):
    """116,534,784 as released (transformers' count); the three fine-tuning
    tokens add 3 x 768. One ~117M model at a time, its weights zeros (the
    count does not depend on them)."""
    skip_random_init(monkeypatch)
    config = gpt_preset("gpt")
    grown_config = config.replace(vocab_size=config.vocab_size + 3)
    assert gpt_num_parameters(config) == 116_534_784
    assert gpt_num_parameters(grown_config) == 116_537_088
    for cfg, expected in ((config, 116_534_784), (grown_config, 116_537_088)):
        backbone = GptBackbone.from_config_object(cfg)
        assert backbone.count_params() == expected
        del backbone
        keras.backend.clear_session()
        gc.collect()


def assert_causal(model, x, t, outputs):
    """Changing the tokens after position t leaves every output at positions
    <= t unchanged and changes every output after t."""
    ids = x["input_word_ids"].copy()
    ids[:, t + 1:] = (ids[:, t + 1:] + 1 + np.arange(ids.shape[1] - t - 1)) % 99
    changed = {**x, "input_word_ids": ids}
    a, b = outputs_of(model, x), outputs_of(model, changed)
    for name in outputs:
        np.testing.assert_allclose(a[name][:, :t + 1], b[name][:, :t + 1], atol=1e-6, rtol=0,
                                   err_msg=name)
        moved = np.abs(a[name][:, t + 1:] - b[name][:, t + 1:]).max(axis=-1)  # (B, S - t - 1)
        assert moved.min() > 1e-3, (name, moved)


def test_gpt_backbone_is_causal(odd_gpt_config):
    model = randomize(GptBackbone.from_config_object(odd_gpt_config))
    assert_causal(model, gpt_inputs(pad_last=0), 3, ("sequence_output", "lm_logits"))


def test_bert_causal_flag_masks_the_future(odd_config):
    """The same check passes with `causal=True` and fails without the mask:
    then earlier positions do see later tokens."""
    x = make_inputs(pad_last=0)
    causal = randomize(BertBackbone.from_bert_config(odd_config, causal=True))
    assert_causal(causal, x, 3, ("sequence_output",))
    bidirectional = BertBackbone.from_bert_config(odd_config, causal=False)
    bidirectional.set_weights(causal.get_weights())
    with pytest.raises(AssertionError):
        assert_causal(bidirectional, x, 3, ("sequence_output",))
    ids = x["input_word_ids"].copy()
    ids[:, 4:] = (ids[:, 4:] + 1) % 99
    a = outputs_of(bidirectional, x)["sequence_output"]
    b = outputs_of(bidirectional, {**x, "input_word_ids": ids})["sequence_output"]
    assert np.abs(a[:, :4] - b[:, :4]).max(axis=-1).min() > 1e-3


def test_lm_head_is_the_token_table(odd_gpt_config):
    backbone = randomize(GptBackbone.from_config_object(odd_gpt_config))
    table = backbone.token_embedding.embeddings
    # One (V, H) weight: the head owns no copy, and every weight is a checkpoint tensor.
    assert [w.shape for w in backbone.weights].count((99, 12)) == 1
    assert len(backbone.weights) == 2 + 12 * odd_gpt_config.n_layer
    assert backbone.count_params() == gpt_num_parameters(odd_gpt_config)
    x = gpt_inputs()
    unused = sorted(set(range(99)) - set(x["input_word_ids"].ravel().tolist()))[0]
    before = outputs_of(backbone, x)
    np.testing.assert_allclose(
        before["lm_logits"], before["sequence_output"] @ np.asarray(table).T, atol=1e-5)
    new_table = np.asarray(table).copy()
    new_table[unused] += 1.0
    table.assign(new_table)  # the row of a token the input does not contain
    after = outputs_of(backbone, x)
    np.testing.assert_array_equal(after["sequence_output"], before["sequence_output"])
    others = np.arange(99) != unused
    np.testing.assert_array_equal(after["lm_logits"][..., others], before["lm_logits"][..., others])
    np.testing.assert_allclose(
        after["lm_logits"][..., unused] - before["lm_logits"][..., unused],
        before["sequence_output"].sum(-1), atol=1e-5)  # h . (e + 1) - h . e


def test_grow_vocabulary_keeps_old_ids(odd_gpt_config):
    backbone = randomize(GptBackbone.from_config_object(odd_gpt_config))
    grown = grow_vocabulary(backbone, 3)
    assert grown.gpt_config.vocab_size == 102
    assert tuple(grown.token_embedding.embeddings.shape) == (102, 12)
    assert grown.count_params() == backbone.count_params() + 3 * 12
    x = gpt_inputs()
    a, b = outputs_of(backbone, x), outputs_of(grown, x)
    np.testing.assert_array_equal(a["sequence_output"], b["sequence_output"])
    np.testing.assert_array_equal(a["lm_logits"], b["lm_logits"][..., :99])
    assert b["lm_logits"].shape == (3, 7, 102)


def test_config_round_trip_and_keras_file(odd_gpt_config, tmp_path):
    backbone = randomize(GptBackbone.from_config_object(odd_gpt_config.replace(resid_pdrop=0.2)))
    _, rebuilt, loaded = run_backbone_test(
        backbone, gpt_inputs(), {"sequence_output": (3, 7, 12), "lm_logits": (3, 7, 99)}, tmp_path)
    assert rebuilt.gpt_config == backbone.gpt_config
    assert rebuilt.resid_pdrop == 0.2
    assert isinstance(loaded, GptBackbone)


def test_mixed_bfloat16_logits_are_float32(odd_gpt_config):
    backbone = GptBackbone.from_config_object(odd_gpt_config, dtype="mixed_bfloat16")
    out = backbone(gpt_inputs())
    assert keras.backend.standardize_dtype(out["lm_logits"].dtype) == "float32"
    assert keras.backend.standardize_dtype(out["sequence_output"].dtype) == "bfloat16"


def test_two_layer_gpt_overfits_a_kilobyte_of_text(tmp_path):
    """COMPARISON_SYSTEMS.md's overfit check: 2 layers, d=64, 2 heads,
    n_ctx 32, about 1 KB of text, next-token loss below 0.1."""
    import inspect

    from keras_bert_impl.gpt import GptCausalLM
    from keras_bert_impl.gpt import GptTokenizer
    from keras_bert_impl.gpt import learn_bpe
    from keras_bert_impl.gpt import write_bpe_files

    text = " ".join(inspect.getdoc(json).split())[:1000]
    vocab, merges = learn_bpe([text], vocab_size=150)
    tokenizer = GptTokenizer(*write_bpe_files(vocab, merges, str(tmp_path)))
    ids = np.array(tokenizer.encode(text), "int32")
    windows = np.stack([ids[i:i + 33] for i in range(0, len(ids) - 33, 16)])  # (N, 33)
    config = GptConfig(vocab_size=tokenizer.vocab_size, n_positions=32, n_embd=64, n_layer=2,
                       n_head=2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GptCausalLM(GptBackbone.from_config_object(config))
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    x = {"input_word_ids": windows[:, :-1], "input_mask": np.ones_like(windows[:, :-1])}
    # The whole text is one batch: one step an epoch, from one iterator (an
    # epoch of arrays starts a new one, which cost more than the step).
    batch = tf.data.Dataset.from_tensors(
        (x, {"lm": windows[:, 1:]}, {"lm": np.ones(windows[:, 1:].shape, "float32")}))
    history = model.fit(batch.repeat(), steps_per_epoch=1, epochs=300, verbose=0, shuffle=False)
    assert len(ids) > 200 and len(text) == 1000
    assert history.history["loss"][0] > 3.0  # it starts near log(vocab)
    assert history.history["loss"][-1] < 0.1, history.history["loss"][-10:]

"""Makes `xlnet_parity/`: a small random Hugging Face XLNet folder and its outputs.

Run by hand (not in CI) in an environment with torch and transformers:

    pip install torch==2.13.0 transformers==5.23.0 safetensors
    python tests/goldens/make_xlnet_parity.py

It builds a random `transformers.XLNetLMHeadModel` of odd sizes (vocab 99,
d_model 12, 3 heads of 4, d_inner 37, 2 layers, untie_r, mem_len 5), moves
every parameter away from its initial value (LayerNorm gains of 1, zero
biases and equal per-layer biases would check nothing), saves it with
`save_pretrained` (config.json + model.safetensors, exactly what
transformers writes) and records, in `xlnet_parity/outputs.npz`:

- `a_*`: the content stream of a fine-tuning batch: LEFT padding
  (`input_mask` 1 = padding), segments A=0, B=1, `<cls>`=2 last, padding 4;
  every layer's output, the LM logits at every position and the memory.
- `b_*`: the two streams with a random `perm_mask` and a `target_mapping`
  (one unused, all-zero row), `reuse_len` 4: the query-stream logits, the
  content stream's last layer and the memory (the first 4 states only).
- `c_*`: a second segment over `a`'s memory: logits, hidden states, memory.
- `d_*`: two streams with `bi_data` (a batch of 4) and `clamp_len` 2.
- `e_*`: "uni" attention with `same_length` over `a`'s memory.

The modes of `b`..`e` are switched on transformers' model attributes (the
folder's config.json keeps the defaults), as `XLNetConfig.replace` does
ours. CI compares our `load_xlnet_checkpoint` of that folder against these
without torch.

    python tests/goldens/make_xlnet_parity.py --check FOLDER

loads FOLDER (e.g. one written by our `save_xlnet_checkpoint` of an
`XLNetPretrainer`) in transformers and prints the largest difference from
the recorded outputs; it exits 1 if transformers reports a missing or
unexpected tensor or a difference above 1e-4.
"""

import argparse
import os
import sys

import numpy as np
import safetensors.numpy
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
FOLDER = os.path.join(HERE, "xlnet_parity")
OUTPUTS = os.path.join(FOLDER, "outputs.npz")

# Odd sizes so that swapped axes fail loudly (d_model 12 = 3 heads x 4).
CONFIG = dict(vocab_size=99, d_model=12, n_layer=2, n_head=3, d_inner=37, ff_activation="gelu",
              untie_r=True, mem_len=5, reuse_len=None, dropout=0.1)
TOLERANCE = 1e-4


def make_inputs():
    """{name: array} of every case's inputs (see the module docstring)."""
    rng = np.random.default_rng(20190619)
    v = CONFIG["vocab_size"]
    x = {}
    # a: 3 x 7, row 0 has 2 padding positions on the left, row 1 one.
    ids = rng.integers(0, v, (3, 7))
    mask = np.zeros((3, 7), np.float32)
    types = np.array([[0, 0, 0, 1, 1, 1, 2]] * 3)
    for row, pad in ((0, 2), (1, 1)):
        mask[row, :pad] = 1.0
        types[row, :pad] = 4
        ids[row, :pad] = 5  # <pad>
    x.update(a_input_word_ids=ids, a_input_type_ids=types, a_input_mask=mask)
    # b: 3 x 7, two segments, random perm mask, 4 prediction slots (row 2's last unused).
    x["b_input_word_ids"] = rng.integers(0, v, (3, 7))
    x["b_input_type_ids"] = np.array([[0, 0, 0, 0, 1, 1, 1]] * 3)
    x["b_input_mask"] = np.zeros((3, 7), np.float32)
    x["b_perm_mask"] = (rng.random((3, 7, 7)) < 0.5).astype(np.float32)
    x["b_target_mapping"] = _mapping(rng, 3, 4, 7, unused_row=(2, 3))
    # c: 3 x 6 continuing a, one segment, no padding.
    x["c_input_word_ids"] = rng.integers(0, v, (3, 6))
    x["c_input_type_ids"] = np.zeros((3, 6), np.int64)
    x["c_input_mask"] = np.zeros((3, 6), np.float32)
    # d: bi_data needs an even batch: 4 x 7.
    x["d_input_word_ids"] = rng.integers(0, v, (4, 7))
    x["d_input_type_ids"] = np.array([[0, 0, 0, 1, 1, 1, 1]] * 4)
    x["d_input_mask"] = np.zeros((4, 7), np.float32)
    x["d_perm_mask"] = (rng.random((4, 7, 7)) < 0.5).astype(np.float32)
    x["d_target_mapping"] = _mapping(rng, 4, 3, 7)
    # e: 3 x 6 over a's memory, uni + same_length; no input_mask (transformers'
    # "uni" path fails to add one: an in-place broadcast), i.e. all zeros.
    x["e_input_word_ids"] = rng.integers(0, v, (3, 6))
    x["e_input_type_ids"] = np.array([[0, 0, 0, 1, 1, 1]] * 3)
    return x


def _mapping(rng, batch, predict, length, unused_row=None):
    mapping = np.zeros((batch, predict, length), np.float32)
    for b in range(batch):
        for p, i in enumerate(rng.choice(length, predict, replace=False)):
            mapping[b, p, i] = 1.0
    if unused_row is not None:
        mapping[unused_row] = 0.0
    return mapping


def run(model, x, case, mems=None, **modes):
    """{name: array} of one case's forward pass, eval mode, float32."""
    transformer = model.transformer
    saved = {k: getattr(transformer, k) for k in modes}
    for k, value in modes.items():
        setattr(transformer, k, value)
    model.eval()
    t = {k[2:]: torch.tensor(v) for k, v in x.items() if k.startswith(case + "_")}
    with torch.no_grad():
        out = model(input_ids=t["input_word_ids"].long(), token_type_ids=t["input_type_ids"].long(),
                    input_mask=t.get("input_mask"), perm_mask=t.get("perm_mask"),
                    target_mapping=t.get("target_mapping"), mems=mems, use_mems=True,
                    output_hidden_states=True)
    for k, value in saved.items():
        setattr(transformer, k, value)
    arrays = {"logits": out.logits.numpy(),
              "mems": np.stack([m.permute(1, 0, 2).numpy() for m in out.mems], axis=1)}
    hidden = [h.numpy() for h in out.hidden_states]
    if "target_mapping" in t:
        arrays["sequence_output"] = hidden[-2]  # (h, g) pairs: the content stream's last
    else:
        arrays["sequence_output"] = hidden[-1]
        for i, h in enumerate(hidden[1:]):
            arrays[f"encoder_output_{i}"] = h
    return {f"{case}_{k}": v.astype(np.float32) for k, v in arrays.items()}, out.mems


def run_all(model, x):
    arrays, mems_a = run(model, x, "a")
    arrays.update(run(model, x, "b", reuse_len=4)[0])
    arrays.update(run(model, x, "c", mems=mems_a)[0])
    arrays.update(run(model, x, "d", bi_data=True, clamp_len=2)[0])
    arrays.update(run(model, x, "e", mems=mems_a, attn_type="uni", same_length=True)[0])
    return arrays


def make():
    torch.manual_seed(0)
    config = transformers.XLNetConfig(**CONFIG)
    model = transformers.XLNetLMHeadModel(config)
    assert model.lm_loss.weight is model.transformer.word_embedding.weight  # tied
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():  # the tied table once
            before = param.clone()
            # N(0, 0.3) on every weight: scores, activations and logits of
            # order one, so every path through the model shows in the outputs.
            param.add_(0.3 * torch.randn(param.shape, generator=generator))
            assert not torch.equal(param, before), name
    model.save_pretrained(FOLDER)
    x = make_inputs()
    arrays = run_all(model, x)
    arrays.update(x)
    arrays["versions"] = np.array(
        [f"transformers={transformers.__version__}", f"torch={torch.__version__}"])
    np.savez_compressed(OUTPUTS, **arrays)
    keys = sorted(safetensors.numpy.load_file(os.path.join(FOLDER, "model.safetensors")))
    print("model.safetensors keys:", keys)
    for name in sorted(os.listdir(FOLDER)):
        print(f"{name}: {os.path.getsize(os.path.join(FOLDER, name))} bytes")


def check(folder):
    recorded = dict(np.load(OUTPUTS))
    model, info = transformers.XLNetLMHeadModel.from_pretrained(folder, output_loading_info=True)
    problems = {k: v for k, v in info.items() if v}  # missing, unexpected, mismatched
    print("loading info:", info)
    x = {k: v for k, v in recorded.items()
         if k[2:].startswith(("input_", "perm_mask", "target_mapping"))}
    arrays = run_all(model, x)
    worst = 0.0
    for name, value in sorted(arrays.items()):
        diff = float(np.abs(value - recorded[name]).max())
        worst = max(worst, diff)
        print(f"{name}: max abs difference {diff:.3e}")
    print(f"worst: {worst:.3e}")
    if problems or worst > TOLERANCE:
        sys.exit(1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", metavar="FOLDER",
                        help="compare FOLDER's outputs in transformers with the recorded ones")
    args = parser.parse_args()
    if args.check:
        check(args.check)
    else:
        make()


if __name__ == "__main__":
    main()

"""Makes `gpt_parity/`: a small random Hugging Face openai-gpt folder and its outputs.

Run by hand (not in CI) in an environment with torch and transformers:

    pip install torch==2.13.0 transformers==5.23.0 safetensors
    python tests/goldens/make_gpt_parity.py

It builds a random `transformers.OpenAIGPTLMHeadModel` of odd sizes (vocab
99, 16 positions, width 12, 3 heads, 2 layers), moves every parameter away
from its initial value (LayerNorm gains of 1 and zero biases would check
nothing), saves it with `save_pretrained` (config.json + model.safetensors,
exactly what transformers writes) and records, for one fixed batch with a
right-padded row, the embeddings, every block's output, the final hidden
state and the LM logits in `gpt_parity/outputs.npz`. CI compares our
`load_gpt_checkpoint` of that folder against these without torch.

    python tests/goldens/make_gpt_parity.py --check FOLDER

loads FOLDER (e.g. one written by our `save_gpt_checkpoint`) in transformers
and prints the largest difference from the recorded outputs; it exits 1 if
transformers reports a missing or unexpected tensor or a difference above
1e-4.
"""

import argparse
import os
import sys

import numpy as np
import safetensors.numpy
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
FOLDER = os.path.join(HERE, "gpt_parity")
OUTPUTS = os.path.join(FOLDER, "outputs.npz")

# Odd sizes so that swapped axes fail loudly (width 12 = 3 heads x 4).
CONFIG = dict(vocab_size=99, n_positions=16, n_embd=12, n_layer=2, n_head=3, afn="gelu")
BATCH, SEQ, PAD = 3, 7, 2  # row 0 ends in PAD padding positions
TOLERANCE = 1e-4


def make_inputs():
    rng = np.random.default_rng(20181011)
    ids = rng.integers(0, CONFIG["vocab_size"], (BATCH, SEQ)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[0, -PAD:] = 0
    ids[0, -PAD:] = 0
    return ids, mask


def run(model, ids, mask):
    """{name: array} of the reference forward pass, eval mode, float32."""
    model.eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor(ids, dtype=torch.long),
                    attention_mask=torch.tensor(mask), output_hidden_states=True)
    hidden = [h.numpy().astype(np.float32) for h in out.hidden_states]
    arrays = {
        "embeddings": hidden[0],  # tokens + positions, before the first block
        "sequence_output": hidden[-1],
        "lm_logits": out.logits.numpy().astype(np.float32),
    }
    for i, h in enumerate(hidden[1:]):
        arrays[f"encoder_output_{i}"] = h
    return arrays


def make():
    torch.manual_seed(0)
    config = transformers.OpenAIGPTConfig(**CONFIG)
    model = transformers.OpenAIGPTLMHeadModel(config)
    assert model.lm_head.weight is model.transformer.tokens_embed.weight  # tied
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():  # the tied table once
            before = param.clone()
            # N(0, 0.3) on every weight: scores, activations and logits of
            # order one, so every path through the model shows in the outputs.
            param.add_(0.3 * torch.randn(param.shape, generator=generator))
            assert not torch.equal(param, before), name
    model.save_pretrained(FOLDER)
    ids, mask = make_inputs()
    arrays = run(model, ids, mask)
    arrays["input_word_ids"] = ids
    arrays["input_mask"] = mask
    arrays["versions"] = np.array(
        [f"transformers={transformers.__version__}", f"torch={torch.__version__}"])
    np.savez_compressed(OUTPUTS, **arrays)
    keys = sorted(safetensors.numpy.load_file(os.path.join(FOLDER, "model.safetensors")))
    print("model.safetensors keys:", keys)
    for name in sorted(os.listdir(FOLDER)):
        print(f"{name}: {os.path.getsize(os.path.join(FOLDER, name))} bytes")


def check(folder):
    recorded = np.load(OUTPUTS)
    model, info = transformers.OpenAIGPTLMHeadModel.from_pretrained(
        folder, output_loading_info=True)
    problems = {k: v for k, v in info.items() if v}  # missing, unexpected, mismatched
    print("loading info:", info)
    arrays = run(model, recorded["input_word_ids"], recorded["input_mask"])
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

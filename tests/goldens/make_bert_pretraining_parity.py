"""Makes `bert_pretraining_parity/`: a small random Hugging Face
`BertForPreTraining` folder (both pretraining heads) and its outputs.

Run by hand (not in CI) in an environment with torch and transformers:

    pip install torch==2.13.0 transformers==5.23.0 safetensors
    python tests/goldens/make_bert_pretraining_parity.py

It builds a random `transformers.BertForPreTraining` of odd sizes (vocab 99,
24 positions, width 12, 3 heads, 2 layers, intermediate 20, 3 token types),
moves every parameter away from its initial value (LayerNorm gains of 1 and
zero biases would check nothing), saves it with `save_pretrained`
(config.json + model.safetensors, exactly what transformers writes) and
records, for one fixed batch with a right-padded row, the masked-LM logits
at every position and the NSP logits in `outputs.npz`. CI compares our
`load_hf_checkpoint` of that folder (a `BertPretrainer`, heads loaded)
against these without torch: what continued pretraining
(`training.pretrain --init_checkpoint`) starts from.

    python tests/goldens/make_bert_pretraining_parity.py --check FOLDER

loads FOLDER (e.g. one written by our `save_hf_checkpoint`) in transformers
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
FOLDER = os.path.join(HERE, "bert_pretraining_parity")
OUTPUTS = os.path.join(FOLDER, "outputs.npz")

# Odd sizes so that swapped axes fail loudly (width 12 = 3 heads x 4).
CONFIG = dict(vocab_size=99, max_position_embeddings=24, hidden_size=12, num_hidden_layers=2,
              num_attention_heads=3, intermediate_size=20, type_vocab_size=3,
              hidden_act="gelu", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
BATCH, SEQ, PAD = 3, 9, 3  # row 0 ends in PAD padding positions
TOLERANCE = 1e-4


def make_inputs():
    rng = np.random.default_rng(20181011)
    ids = rng.integers(1, CONFIG["vocab_size"], (BATCH, SEQ)).astype(np.int32)
    types = (np.arange(SEQ)[None, :] >= rng.integers(2, SEQ, (BATCH, 1))).astype(np.int32)
    types[2] = np.minimum(2 * types[2], 2)  # the third token type too
    mask = np.ones_like(ids)
    mask[0, -PAD:] = 0
    ids[0, -PAD:] = 0
    types[0, -PAD:] = 0
    return ids, types, mask


def run(model, ids, types, mask):
    """{name: array} of the reference forward pass, eval mode, float32."""
    model.eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor(ids, dtype=torch.long),
                    token_type_ids=torch.tensor(types, dtype=torch.long),
                    attention_mask=torch.tensor(mask))
    return {"prediction_logits": out.prediction_logits.numpy().astype(np.float32),
            "seq_relationship_logits": out.seq_relationship_logits.numpy().astype(np.float32)}


def make():
    torch.manual_seed(0)
    model = transformers.BertForPreTraining(transformers.BertConfig(**CONFIG))
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():  # the tied table once
            before = param.clone()
            # N(0, 0.3) on every weight: activations and logits of order one.
            param.add_(0.3 * torch.randn(param.shape, generator=generator))
            assert not torch.equal(param, before), name
    model.save_pretrained(FOLDER)
    ids, types, mask = make_inputs()
    arrays = run(model, ids, types, mask)
    arrays.update(input_word_ids=ids, input_type_ids=types, input_mask=mask, versions=np.array(
        [f"transformers={transformers.__version__}", f"torch={torch.__version__}"]))
    np.savez_compressed(OUTPUTS, **arrays)
    keys = sorted(safetensors.numpy.load_file(os.path.join(FOLDER, "model.safetensors")))
    print("model.safetensors keys:", keys)
    for name in sorted(os.listdir(FOLDER)):
        print(f"{name}: {os.path.getsize(os.path.join(FOLDER, name))} bytes")


def check(folder):
    recorded = np.load(OUTPUTS)
    model, info = transformers.BertForPreTraining.from_pretrained(
        folder, output_loading_info=True)
    problems = {k: v for k, v in info.items() if v}  # missing, unexpected, mismatched
    print("loading info:", info)
    arrays = run(model, recorded["input_word_ids"], recorded["input_type_ids"],
                 recorded["input_mask"])
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

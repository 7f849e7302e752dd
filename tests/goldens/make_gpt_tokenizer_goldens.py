"""Makes the GPT tokenizer goldens: a small BPE vocabulary and a reference's ids.

Run by hand (not in CI) where transformers 4 is installed, without ftfy and
spaCy (neither is needed; torch is not needed either):

    pip install transformers==4.57.1
    python tests/goldens/make_gpt_tokenizer_goldens.py

Reference: `transformers.OpenAIGPTTokenizer` of transformers 4.57.1, the
pure-Python class (`PreTrainedTokenizer`). Without ftfy and spaCy its
`tokenize()` lowercases the text character by character, runs Hugging
Face's BERT `BasicTokenizer(do_lower_case=True)` (every Unicode category
C* dropped, NFC, accents stripped, punctuation and CJK split) and then BPE
on each word, the last symbol of a word ending in "</w>". transformers 5
removed that class: its `OpenAIGPTTokenizer` is the Rust-backed one (the
`tokenizers` crate's BertNormalizer and BertPreTokenizer): on these
strings it gives the same ids but for the 6 with characters unassigned in
Python's Unicode tables (category Cn), which it keeps and the Python
class drops.

`split_special_tokens=True` is passed so that "<unk>" typed in the text is
split like any text, as our tokenizers treat text (BERT's "[MASK]" too).

Outputs, committed:

- `gpt_bpe/vocab.json`, `gpt_bpe/merges.txt`: learned by the reference
  library's own trainer (`tokenizers.trainers.BpeTrainer`), not by our
  `bpe_learner`, so the tokenizer test does not lean on code it checks.
  Training text: the standard library's docstrings (`training.pretraining.default_corpus`)
  plus every other string of `tokenizer_corpus.json`, so the other half
  has characters outside the vocabulary (<unk>). The trainer breaks ties
  between equally frequent pairs in hash order, so a rerun may learn a
  different, equally valid, vocabulary: commit the three files together.
- `gpt_tokenizer_goldens.json.gz`: the reference's ids for every string of
  `tokenizer_corpus.json` plus the extra strings below (GPT-specific edge
  cases), its decoded text for some of them, and the ids it gives GPT's
  fine-tuning tokens.
"""

import gzip
import json
import os
import sys

import tokenizers
import transformers
from tokenizers import normalizers
from tokenizers import pre_tokenizers
from tokenizers import trainers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)
from training.pretraining.default_corpus import default_documents  # noqa: E402

BPE_DIR = os.path.join(HERE, "gpt_bpe")
OUT = os.path.join(HERE, "gpt_tokenizer_goldens.json.gz")
VOCAB_SIZE = 4000  # about 3,000 merges after the alphabet
SPECIAL = ["_start_", "_delimiter_", "_classify_"]

# GPT-specific cases the BERT corpus lacks: category C characters the BERT
# rule keeps (private use Co, unassigned Cn), final sigma, symbols that
# merge with themselves, special-token look-alikes.
EXTRA = [
    "<unk>", "<UNK> is not special", "_start_ hello _delimiter_ world _classify_",
    "a\ue000b", "private\U000f0000use", "\ue000", "x \U00100000 y",
    "a\u0378b", "un\ufdd0assigned", "plane\U0002fffftwo", "tag\U000e0080", "\u0378",
    "new in unicode 15: \U0001f6dc \U00011f00 \U0001fae8 k\U00031350",
    "ΣΟΦΟΣ", "ΌΣΟΣ ς σ Σ", "ΑΣ. ΣΑ Σ", "ὈΔΥΣΣΕΎΣ",
    "aaaa aaaaa aaaaaaa", "a" * 300, "ab" * 150, "é" * 120, "ll" * 9, "eee eeee", "sss ssss",
    "mississippi Mississippi MISSISSIPPI", "aaa bbb aaabbb ababab",
    "v\x0bt\x0cf\x1cg\x1dh\x1ei\x1fj\x85k", "line\u2028sep\u2029par", "a\ufffdb", "n\x00ull",
    "e\u0301 E\u0301 \u00e9 \u00c9", "a\u20dd circle", "क्षत्रिय हिन्दी", "ﬁne ǅ ẞ İ K Å",
    "\u3000full\u3000width\u3000space", "mixed 東京tokyo大学2024年",
    "the the the the the", "The quick brown fox jumps over the lazy dog.",
    "It's 3:45pm -- isn't it? (yes/no) [maybe] {ok}",
]


def training_lines(corpus):
    for sentences in default_documents():
        yield from sentences
    yield from corpus[::2]


def learn_vocabulary(corpus):
    os.makedirs(BPE_DIR, exist_ok=True)
    model = tokenizers.models.BPE(unk_token="<unk>", end_of_word_suffix="</w>")
    tokenizer = tokenizers.Tokenizer(model)
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=["<unk>"],
        end_of_word_suffix="</w>",
        show_progress=False,
    )
    tokenizer.train_from_iterator(training_lines(corpus), trainer)
    tokenizer.model.save(BPE_DIR)
    vocab_file = os.path.join(BPE_DIR, "vocab.json")
    merges_file = os.path.join(BPE_DIR, "merges.txt")
    # The trainer numbers the "x</w>" symbols in hash order; renumber them
    # so that a rerun writes the same files: <unk>, characters by code
    # point, their "</w>" forms, merged symbols in merge order.
    with open(vocab_file, encoding="utf-8") as f:
        trained = json.load(f)
    with open(merges_file, encoding="utf-8") as f:
        merged = ["".join(line.split()) for line in f.read().splitlines()[1:] if line]
    chars = sorted(t for t in trained if len(t) == 1)
    order = ["<unk>", *chars, *sorted(t for t in trained if len(t) == 5 and t.endswith("</w>")),
             *merged]
    vocab = {}
    for token in order:
        vocab.setdefault(token, len(vocab))
    if set(vocab) != set(trained):
        raise SystemExit(f"Unexpected trainer vocabulary: {set(vocab) ^ set(trained)}")
    with open(vocab_file, "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False, separators=(",", ":"))
    return vocab_file, merges_file


def main():
    if not transformers.__version__.startswith("4."):
        raise SystemExit(
            f"Needs transformers 4 (its pure-Python OpenAIGPTTokenizer); found "
            f"{transformers.__version__}. pip install transformers==4.57.1")
    with open(os.path.join(HERE, "tokenizer_corpus.json"), encoding="utf-8") as f:
        corpus = json.load(f)
    vocab_file, merges_file = learn_vocabulary(corpus)
    reference = transformers.OpenAIGPTTokenizer(vocab_file, merges_file)
    if reference.fix_text is not None:
        raise SystemExit("Uninstall ftfy and spaCy: the reference is the BasicTokenizer path.")
    strings = corpus + EXTRA
    ids = [
        reference.convert_tokens_to_ids(reference.tokenize(text, split_special_tokens=True))
        for text in strings
    ]
    decoded = {str(i): reference.decode(ids[i]) for i in range(0, len(strings), 7)}
    vocab_size = len(reference)
    reference.add_special_tokens({"additional_special_tokens": SPECIAL})
    goldens = {
        "reference": f"transformers=={transformers.__version__} OpenAIGPTTokenizer "
                     f"(pure Python, BasicTokenizer path), tokenizers=={tokenizers.__version__}",
        "extra_strings": EXTRA,
        "ids": ids,
        "decoded": decoded,
        "vocab_size": vocab_size,
        "unk_id": reference.unk_token_id,
        "special_ids": dict(zip(SPECIAL, reference.convert_tokens_to_ids(SPECIAL))),
    }
    text = json.dumps(goldens, ensure_ascii=True, separators=(",", ":"))
    with open(OUT, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0) as packed:
        packed.write(text.encode("utf-8"))
    with open(merges_file, encoding="utf-8") as f:
        num_merges = sum(1 for line in f) - 1
    unk = sum(row.count(reference.unk_token_id) for row in ids)
    print(f"{vocab_size} tokens, {num_merges} merges; {len(strings)} strings, "
          f"{sum(map(len, ids))} ids ({unk} <unk>) -> {OUT} ({os.path.getsize(OUT)} bytes)")
    for path in (vocab_file, merges_file):
        print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()

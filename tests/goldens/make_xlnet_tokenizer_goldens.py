"""Makes the XLNet tokenizer goldens: a small SentencePiece model and a reference's ids.

Run by hand (not in CI) where transformers 4 and sentencepiece are installed
(torch is not needed):

    pip install transformers==4.57.1 sentencepiece==0.2.1
    python tests/goldens/make_xlnet_tokenizer_goldens.py

Reference: `transformers.XLNetTokenizer` of transformers 4.57.1, the slow
class built on the `sentencepiece` library (`PreTrainedTokenizer`): its
`preprocess_text` (whitespace collapsed, `` and '' to ", NFKD with combining
marks dropped unless `keep_accents`, optional lowercase) and `_tokenize`
(SentencePiece pieces; a piece ending in a digit and "," is encoded again
without the comma and the "▁" fixed up) are the original XLNet's
`prepro_utils.preprocess_text` and `encode_pieces`. transformers 5 removed
that class: its `XLNetTokenizer` is the Rust `tokenizers` one, which has no
digit-comma rule, always strips accents and splits on whitespace before
the model, so it is not the reference.

`split_special_tokens=True` is passed so that "<cls>" or "<mask>" typed in
text is split like any text, as our tokenizers treat text. "<eop>" typed in
text still becomes <eop>: it is a user-defined symbol of the SentencePiece
model itself, as in XLNet's (its data files mark paragraph ends that way).

Outputs, committed:

- `xlnet_spm/spiece.model`: a 4,000-piece unigram model trained here by
  `sentencepiece` itself with the flags of XLNet's README (control symbols
  <cls> <sep> <pad> <mask> <eod>, user-defined <eop> and punctuation,
  character coverage 0.99995), not by our `spm_learner`, so the tokenizer
  test does not lean on code it checks. Training text: the standard
  library's docstrings (`training.pretraining.default_corpus`) plus every other string
  of `tokenizer_corpus.json`, so the other half has characters outside the
  model (<unk>). Commit the model and the goldens together: a rerun under
  another Python (other docstrings) learns another model.
- `xlnet_tokenizer_goldens.json.gz`: the reference's ids for every string
  of `tokenizer_corpus.json` plus the extra strings below (XLNet's rules),
  with the default options and lowercased; for a quarter of the strings
  and all extras also with `keep_accents=True` and `remove_space=False`;
  pieces for the extras; the fine-tuning layout of a few pairs; the special
  ids; and the original `data_utils._is_start_piece` of every piece.
"""

import gzip
import io
import json
import os
import sys
import unicodedata

import sentencepiece as spm
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)
from training.pretraining.default_corpus import default_documents  # noqa: E402

SPM_DIR = os.path.join(HERE, "xlnet_spm")
OUT = os.path.join(HERE, "xlnet_tokenizer_goldens.json.gz")
VOCAB_SIZE = 4000

# XLNet's README: spm_train --character_coverage=0.99995 --model_type=unigram
# --control_symbols=<cls>,<sep>,<pad>,<mask>,<eod>
# --user_defined_symbols=<eop>,.,(,),",-,–,£,€ --shuffle_input_sentence
# --input_sentence_size=10000000 (and the defaults: unk 0, <s> 1, </s> 2,
# no pad piece, nmt_nfkc, split_by_whitespace).
XLNET_FLAGS = dict(
    model_type="unigram",
    character_coverage=0.99995,
    control_symbols=["<cls>", "<sep>", "<pad>", "<mask>", "<eod>"],
    user_defined_symbols=["<eop>", ".", "(", ")", '"', "-", "–", "£", "€"],
    shuffle_input_sentence=True,
    input_sentence_size=10_000_000,
    split_by_whitespace=True,
    unk_id=0,
    bos_id=1,
    eos_id=2,
    pad_id=-1,
)

# XLNet's rules the general corpus hardly touches.
EXTRA = [
    # `` and '' become ", in order, left to right.
    "``Hello,'' she said.", "He said ``yes'' and ''no``.", "'''triple''' ```x```",
    "`single` 'single'", "``''``''", "don''t", "''", "``",
    # A piece ending in a digit and a comma.
    "1,000,000", "2018,", "In 2018, the", "born in 2000, and this is falsé.", "$1,000.",
    "12,34,56,", "a1,b2,c3,", "x9, y9,z", "1,", ",1,", "9,9,9,9,", "100,000,000,000 people",
    "1, 2, 3, 4,", "0,5 3,14159", "1992,1993,1994", "92000,", "Apollo11, Gemini7,",
    "²,³, ①,② ٣,४,", "v2,v3,", "page 12,\tline 3,\nend 4,",
    # Whitespace as Python's str.split sees it.
    "  multiple   spaces  ", "tab\tseparated\tvalues", "new\nline\r\nhere", "\u3000ideo\u3000space",
    "no\xa0break\u202fnarrow", "sep\x1cfile\x1dgroup\x1erecord\x1funit", "line\u2028para\u2029end",
    "zero\u200bwidth", "mongolian\u180evowel", "\x0bvertical\x0cfeed\x85next", "", " ", " \t\n ",
    # Accents, compatibility forms, case.
    "naïve café résumé", "e\u0301 E\u0301 \u00e9", "Ångström Ålesund", "Ⅻ ﬁ ½ ℍ ℌ ㎏", "İstanbul ı",
    "ΣΟΦΟΣ ΌΣΟΣ σ ς", "HeLLo WORLD ẞ ß", "𝚺 A𝚺 A𝚺B 𝚺A ΑΣ'Σ", "Α𝚺'𝚺 b𝚺.𝚺c 𝚺𝚺 d𝚺\u00ad e\u00ad𝚺", "ＦＵＬＬ width １２,",
    "한국어 문장", "ﾊﾝｶｸ ｶﾀｶﾅ", "a\u0308\u0301b", "\u0301\u0302", "x \u00a8 y \u00b4 z",
    # XLNet's symbols typed in text.
    "end of paragraph.<eop>", "<eop> <eod> <cls> <sep> <mask> <pad> <unk> <s> </s>", "<MASK> <Eop>",
    "a<sep>b", "(brackets) \"quotes\" - – — £5 €6",
    # Characters outside the model, in runs.
    "😀😀😀 a😀b", "𓀀𓀁 hieroglyphs", "new in unicode 15: \U0001f6dc \U00011f00 \U0001fae8",
    "The quick brown fox jumps over the lazy dog.", "It's 3:45pm -- isn't it? (yes/no)",
    "word " * 300,
]

# The original XLNet `data_utils._is_start_piece`, the reference for ours.
SPECIAL_PIECES = set(list('!"#$%&"()*+,-./:;?@[\\]^_`{|}~'))


def original_is_start_piece(piece):
    return piece.startswith("▁") or piece.startswith("<") or piece in SPECIAL_PIECES


def training_lines(corpus):
    for sentences in default_documents():
        yield from sentences
    yield from (text for text in corpus[::2] if text.strip())


def train_model(corpus):
    os.makedirs(SPM_DIR, exist_ok=True)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=training_lines(corpus),
        model_writer=model,
        vocab_size=VOCAB_SIZE,
        num_threads=2,
        minloglevel=2,
        **XLNET_FLAGS,
    )
    path = os.path.join(SPM_DIR, "spiece.model")
    with open(path, "wb") as f:
        f.write(model.getvalue())
    return path


def reference_ids(tokenizer, strings):
    return [
        tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text, split_special_tokens=True))
        for text in strings
    ]


def main():
    if not transformers.__version__.startswith("4."):
        raise SystemExit(
            f"Needs transformers 4 (its sentencepiece XLNetTokenizer); found "
            f"{transformers.__version__}. pip install transformers==4.57.1 sentencepiece")
    with open(os.path.join(HERE, "tokenizer_corpus.json"), encoding="utf-8") as f:
        corpus = json.load(f)
    model_file = train_model(corpus)
    strings = corpus + EXTRA
    subset = list(range(0, len(corpus), 4)) + list(range(len(corpus), len(strings)))
    options = {
        "default": ({}, range(len(strings))),
        "lower": ({"do_lower_case": True}, range(len(strings))),
        "keep_accents": ({"keep_accents": True}, subset),
        "keep_space": ({"remove_space": False}, subset),
        "lower_keep_accents": ({"do_lower_case": True, "keep_accents": True}, subset),
    }
    cases = {}
    for name, (kwargs, indices) in options.items():
        reference = transformers.XLNetTokenizer(model_file, **kwargs)
        cases[name] = {
            "options": kwargs,
            "indices": list(indices),
            "ids": reference_ids(reference, [strings[i] for i in indices]),
        }
    reference = transformers.XLNetTokenizer(model_file)
    # `encode` (what users call) gives the same ids where no special token is typed.
    for index in range(0, len(strings), 5):
        if "<" not in strings[index]:
            expected = cases["default"]["ids"][index]
            assert reference.encode(strings[index], add_special_tokens=False) == expected
    pairs = [("Hello world", None), ("Is this 1,000?", "Yes, it is 1,000."), ("", "b"), ("a", "")]
    layouts = []
    for a, b in pairs:
        ids_a = reference.encode(a, add_special_tokens=False)
        ids_b = None if b is None else reference.encode(b, add_special_tokens=False)
        layouts.append({
            "a": a, "b": b,
            "input_ids": reference.build_inputs_with_special_tokens(ids_a, ids_b),
            "token_type_ids": reference.create_token_type_ids_from_sequences(ids_a, ids_b),
        })
    names = ["<unk>", "<s>", "</s>", "<cls>", "<sep>", "<pad>", "<mask>", "<eod>", "<eop>"]
    pieces = [reference.convert_ids_to_tokens(i) for i in range(reference.vocab_size)]
    goldens = {
        "reference": f"transformers=={transformers.__version__} XLNetTokenizer (sentencepiece, "
                     f"slow), sentencepiece=={spm.__version__}, Python {sys.version.split()[0]} "
                     f"(Unicode {unicodedata.unidata_version})",
        "extra_strings": EXTRA,
        "cases": cases,
        "extra_pieces": [reference.tokenize(text, split_special_tokens=True) for text in EXTRA],
        "layouts": layouts,
        "vocab_size": reference.vocab_size,
        "special_ids": dict(zip(names, reference.convert_tokens_to_ids(names))),
        "is_start_piece": [int(original_is_start_piece(p)) for p in pieces],
    }
    text = json.dumps(goldens, ensure_ascii=True, separators=(",", ":"))
    with open(OUT, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0) as packed:
        packed.write(text.encode("utf-8"))
    default_ids = cases["default"]["ids"]
    unk = sum(row.count(reference.unk_token_id) for row in default_ids)
    print(f"{reference.vocab_size} pieces; {len(strings)} strings, {sum(map(len, default_ids))} ids "
          f"({unk} <unk>) -> {OUT} ({os.path.getsize(OUT)} bytes)")
    print(f"{model_file}: {os.path.getsize(model_file)} bytes")
    print(goldens["special_ids"])


if __name__ == "__main__":
    main()

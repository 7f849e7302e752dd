"""A cased WordPiece vocabulary derived from the uncased one, for tests.

No cased BERT vocabulary ships offline, so the cased tokenizer is tested
with this one: the uncased vocabulary plus, appended after it, the
Capitalized and UPPER forms of its whole-word alphabetic tokens, then
accented letters (both cases) and combining marks as word starts and "##"
continuations, so that accents (NFC and NFD) reach WordPiece instead of
[UNK]. Deterministic, so goldens and tests agree.
"""

ACCENTED_LETTERS = "àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿăąćčďđęěğıłńňőœřśşšţťůűźżžðþ"
COMBINING_MARKS = [chr(c) for c in range(0x0300, 0x0370)]


def derive_cased_vocab(uncased_path, out_path):
    with open(uncased_path, encoding="utf-8") as f:
        tokens = [line.rstrip("\n") for line in f]
    seen = set(tokens)
    extra = []
    for token in tokens:
        if token.startswith("[") or not token.isalpha():
            continue
        for form in (token.capitalize(), token.upper()):
            if form not in seen:
                seen.add(form)
                extra.append(form)
    letters = list(ACCENTED_LETTERS) + list(ACCENTED_LETTERS.upper()) + COMBINING_MARKS
    for char in letters:
        for form in (char, "##" + char):
            if form not in seen:
                seen.add(form)
                extra.append(form)
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("\n".join(tokens + extra) + "\n")
    return out_path

"""Makes `tokenizer_corpus.json`: 2,000+ varied strings for tokenizer parity.

Run by hand; the output is committed. English prose and code come from the
Python standard library's docstrings and sources; the rest is assembled
here from fixed lists with a seeded random generator: URLs, numbers,
accents in NFC and NFD, CJK, Korean, Thai and other scripts, emoji and ZWJ
sequences, full-width forms, control and zero-width characters, very long
words, empty and whitespace-only strings.
"""

import importlib
import inspect
import json
import os
import random
import unicodedata

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tokenizer_corpus.json")

MODULES = """abc argparse ast asyncio base64 bisect calendar cmath codecs collections
colorsys configparser contextlib copy csv dataclasses datetime decimal difflib dis
email enum fnmatch fractions ftplib functools getopt gettext glob gzip hashlib heapq
hmac html http imaplib inspect io ipaddress itertools json keyword linecache locale
logging lzma mailbox mimetypes numbers operator optparse pathlib pickle pkgutil
platform plistlib poplib pprint queue quopri random re reprlib sched secrets shelve
shlex shutil smtplib socket socketserver sqlite3 statistics string stringprep struct
subprocess tarfile tempfile textwrap threading timeit tokenize traceback types typing
unittest urllib uuid warnings wave weakref webbrowser zipfile zipimport""".split()

ACCENTED = """café naïve façade résumé déjà-vu crème brûlée Zürich Straße Ångström
São Paulo El Niño jalapeño Dvořák Łódź Kraków İstanbul Ελληνικά Tiếng Việt
Nguyễn Đặng Hà Nội Ålesund Øresund Þórr Müller Göteborg Málaga Bogotá Perú
coöperate Brontë Noël Chloë Señor über Ärger Öl Œuvre Æsir piñata""".split()

SCRIPTS = [
    "東京は日本の首都です。", "我爱自然语言处理。", "北京大学成立于1898年。", "漢字と仮名を混ぜた文章",
    "カタカナとひらがなの混在テキスト", "今日はいい天気ですね！", "中华人民共和国", "𠀀𠀁𪜀 extension B",
    "한국어 문장입니다.", "안녕하세요, 세계!", "서울특별시 강남구", "สวัสดีครับ", "ภาษาไทยไม่มีการเว้นวรรค",
    "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "Привет, мир!", "Γειά σου Κόσμε", "ΣΟΦΟΣ ΟΔΟΣ",
    "Ἀθῆναι", "ქართული ენა", "Հայերեն", "ᚠᚢᚦᚨᚱᚲ", "ꦲꦏ꧀ꦱꦫ", "ⲙⲉⲧⲣⲉⲙⲛⲭⲏⲙⲓ",
]

EMOJI = [
    "🙂", "😂🤣", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇯🇵🇺🇸", "❤️", "☕", "🧑🏿‍💻", "👩‍❤️‍💋‍👨",
    "✈️", "1️⃣", "🐍🦀", "🤷‍♀️", "©®™",
]

FULLWIDTH = "".join(chr(c) for c in range(0xFF01, 0xFF5F))

SPECIAL_CHARS = [
    "\x00", "\x07", "\x1b", "\x7f", "\u200b", "\u200c", "\u200d", "\ufeff", "\u00ad",
    "\ufffd", "\t", "\n", "\r", "\u2028", "\u00a0", "\u3000", "\u202f", "\u2060",
    "\u200e", "\u200f", "\U000e0001", "\u0085", "\u180e",
]

EDGE = [
    "[CLS] this is [MASK] text [SEP]", "don't won't y'all", "U.S.A. e.g. i.e.", "state-of-the-art",
    "x² + y³ = z¹", "ﬁne ﬂow ﬃ", "Ⅻ Ⅳ ⅷ", "½ ¼ ¾", "C++ C# F#", "a—b–c‐d", "«quoted» „quoted“",
    "$100 €50 £20 ¥1000", "100% ≥ 99.9‰", "§ 4 ¶ 2", "∀x∈ℝ: x²≥0", "→ ⇒ ↔", "math: ∑∫∂√∞",
    "ß ẞ", "ǅ ǈ ǋ", "Ǆ", "ﬀ", "İ", "ı", "K (Kelvin sign)", "Å (Angstrom sign)", "µ vs μ",
    "tab\tseparated\tvalues", "line\nbreaks\r\nhere", "  leading and trailing  ", "a" * 5,
]

WORDS = """the of and to in is was for that on as with by at from his he it an were are
which this be or has had not first one their its new after who they have her she two
been other when there all during into school time may years more most only over city
some world would where later up such used many can state about national out known
university united then made""".split()


def docstring_paragraphs():
    paragraphs = []
    for name in MODULES:
        try:
            module = importlib.import_module(name)
        except Exception:
            continue
        objects = [module] + [getattr(module, a) for a in sorted(dir(module))[:60]]
        for obj in objects:
            doc = inspect.getdoc(obj) if callable(obj) or inspect.ismodule(obj) else None
            if not doc:
                continue
            for paragraph in doc.split("\n\n"):
                paragraph = paragraph.strip()
                if 20 <= len(paragraph) <= 400 and paragraph not in paragraphs:
                    paragraphs.append(paragraph)
    return paragraphs


def code_lines(rng):
    lines = []
    for name in ("json.decoder", "textwrap", "string", "fractions", "difflib", "shlex"):
        source = inspect.getsource(importlib.import_module(name))
        lines += [line for line in source.splitlines() if 15 < len(line.strip()) < 120]
    return rng.sample(lines, 150)


def main():
    rng = random.Random(12345)
    corpus = []
    corpus += docstring_paragraphs()[:1150]
    corpus += code_lines(rng)
    for _ in range(80):
        host = rng.choice(["example.com", "docs.python.org", "a.b-c.co.uk", "localhost:8080"])
        path = "/".join(rng.choice(WORDS) for _ in range(rng.randint(0, 4)))
        query = f"?q={rng.choice(WORDS)}&page={rng.randint(1, 99)}" if rng.random() < 0.5 else ""
        corpus.append(rng.choice([
            f"https://{host}/{path}{query}", f"see http://{host}/{path} now",
            f"mail me: {rng.choice(WORDS)}.{rng.choice(WORDS)}@{host}",
            f"ftp://{host}/{path}.tar.gz#frag",
        ]))
    for _ in range(80):
        corpus.append(rng.choice([
            f"{rng.randint(0, 10**9):,}", f"{rng.uniform(-1e6, 1e6):.4f}", f"{rng.random():.3e}",
            f"+1 ({rng.randint(200, 999)}) {rng.randint(200, 999)}-{rng.randint(1000, 9999)}",
            f"{rng.randint(1900, 2100)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00Z",
            f"version {rng.randint(0, 9)}.{rng.randint(0, 99)}.{rng.randint(0, 999)}rc{rng.randint(1, 3)}",
            f"{rng.randint(1, 99)}kg / {rng.randint(1, 999)}km/h", f"0x{rng.getrandbits(32):08X}",
        ]))
    for word in ACCENTED:
        sentence = f"{word} {rng.choice(WORDS)} {word.upper()} {word.capitalize()}"
        corpus.append(unicodedata.normalize("NFC", sentence))
        corpus.append(unicodedata.normalize("NFD", sentence))
    for text in SCRIPTS:
        corpus += [text, f"{rng.choice(WORDS)} {text} {rng.choice(WORDS)}", text.replace(" ", "")]
    for emoji in EMOJI:
        corpus += [emoji, f"I {rng.choice(WORDS)} {emoji} it{emoji}!", f"{emoji}{emoji}{rng.choice(WORDS)}"]
    for i in range(40):
        piece = FULLWIDTH[i * 2: i * 2 + rng.randint(3, 12)]
        corpus.append(f"{piece} {rng.choice(WORDS)}")
    for _ in range(120):
        words = [rng.choice(WORDS + ACCENTED) for _ in range(rng.randint(2, 8))]
        for _ in range(rng.randint(1, 4)):
            words.insert(rng.randint(0, len(words)), rng.choice(SPECIAL_CHARS) * rng.randint(1, 3))
        corpus.append(rng.choice(["", " "]).join(words))
    for length in (50, 99, 100, 101, 150, 199, 200, 201, 202, 250, 400):
        for alphabet in ("abcdefghij", "supercalifragilistic", "é"):
            word = (alphabet * (length // len(alphabet) + 1))[:length]
            corpus.append(f"a {word} b")
    corpus += ["", " ", "  ", "\t", "\n\n", " \t\r\n ", "\u3000", "\u00a0\u2003", "\u200b", "\x00"]
    corpus += EDGE
    corpus += [" ".join(rng.choice(WORDS).capitalize() if rng.random() < 0.3 else rng.choice(WORDS)
                        for _ in range(rng.randint(1, 30))) for _ in range(150)]
    assert len(corpus) >= 2000, len(corpus)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(corpus, f, ensure_ascii=True, indent=0)
    print(f"{len(corpus)} strings -> {OUT} ({os.path.getsize(OUT)} bytes)")


if __name__ == "__main__":
    main()

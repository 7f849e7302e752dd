"""The default pretraining corpus, needing no download: the installed Python
standard library's docstrings plus `pydoc_data.topics`, in the pretraining
text format (one sentence per line, a blank line between documents).

Docstrings are read from the source files with `ast` (no module is imported,
so nothing runs). A document is one docstring or one pydoc topic with at
least `min_words` words. Documents are split into train and held out by a
hash of their text, so the split is the same on every machine and a
document never lands on both sides.

Parsing the library takes about 2.5 s of one core, in every process that
needs the corpus (the main job, Table 5, the word-order task). So the
documents are also kept on disk, in `$XDG_CACHE_HOME/keras_bert_impl/` (or
`~/.cache/...`), under a key of everything they are made from: this file's
code, the Python version, the library's folder, the path, size and
modification time of every file read, and `min_words`. A changed file, a
new Python or changed code gives a new key and a new parse; an unreadable
or unwritable cache is parsed past, never an error.
"""

import ast
import collections
import functools
import hashlib
import importlib.util
import json
import os
import re
import sys
import sysconfig
import tempfile

# Sentence ends: ., ! or ? then space(s) and an upper-case letter or quote.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(`])")
_SKIP_DIRS = {"test", "tests", "idlelib", "tkinter", "turtledemo", "site-packages", "lib2to3",
              "ensurepip", "__pycache__", "pydoc_data"}


def _sentences(text):
    """Paragraphs -> sentences; code-like lines (indented blocks, >>>) dropped."""
    out = []
    for paragraph in re.split(r"\n\s*\n", text):
        lines = [line.strip() for line in paragraph.splitlines()]
        if not lines or any(line.startswith((">>>", "...")) for line in lines):
            continue
        if paragraph.startswith((" ", "\t")) and len(lines) > 1:  # literal blocks
            continue
        joined = " ".join(line for line in lines if line)
        out += [s.strip() for s in _SENTENCE_END.split(joined) if len(s.split()) >= 3]
    return out


_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
# The fields that hold statements: a class or function is a statement, so
# none is ever below an expression.
_STATEMENT_FIELDS = {"body", "orelse", "finalbody", "handlers", "cases"}


def _docstrings(path):
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return
    yield from _tree_docstrings(tree)


def _tree_docstrings(tree):
    """The docstrings of `tree`'s module, classes and functions in `ast.walk`'s
    order (breadth first, fields in order), without walking expressions,
    which `ast.walk` visits too: the corpus took 2.3 s with it, 1.5 s so."""
    queue = collections.deque([tree])
    while queue:
        node = queue.popleft()
        if isinstance(node, _DOCUMENTED):
            doc = ast.get_docstring(node)
            if doc:
                yield doc
        for field in node._fields:
            if field in _STATEMENT_FIELDS:
                children = getattr(node, field)
                if isinstance(children, list):  # IfExp's and Lambda's `body` is an expression
                    queue.extend(children)


def default_documents(min_words=20):
    """Lists of sentences, in a fixed order (sorted files, then pydoc topics).

    Read once per process (from the disk cache, or parsed: see the module
    docstring); later calls get a fresh copy of that result (Table 5 reads
    the corpus, then builds its tasks from the same documents).
    """
    return [list(sentences) for sentences in _documents(min_words)]


@functools.cache
def _documents(min_words):
    """`default_documents`, as tuples (nothing a caller can change)."""
    return _cached_documents(sysconfig.get_paths()["stdlib"], min_words)


def cache_folder():
    """Where the parsed corpus is kept."""
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(home, "keras_bert_impl", "default_corpus")


def _cached_documents(stdlib, min_words):
    paths = list(_source_files(stdlib))
    topics = importlib.util.find_spec("pydoc_data.topics").origin
    key = _cache_key(stdlib, [*paths, topics], min_words)
    path = os.path.join(cache_folder(), f"{key}.json")
    try:
        with open(path, encoding="utf-8") as f:
            return tuple(tuple(sentences) for sentences in json.load(f))
    except (OSError, ValueError, TypeError):
        pass  # not cached yet, or unreadable: parse
    documents = _parse(paths, min_words)
    try:
        os.makedirs(cache_folder(), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache_folder(), prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(documents, f, ensure_ascii=False)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    except OSError:
        pass  # no cache on a read-only home: parsed every time, as before
    return documents


def _source_files(stdlib):
    """The library's `.py` files the corpus reads, in its order."""
    for root, dirs, files in os.walk(stdlib):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.join(root, name)


def _cache_key(stdlib, paths, min_words):
    key = hashlib.sha256()
    with open(__file__, "rb") as f:
        key.update(f.read())
    key.update(f"{sys.version}\0{stdlib}\0{min_words}\0".encode())
    for path in paths:
        stat = os.stat(path)
        key.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    return key.hexdigest()[:32]


def _parse(paths, min_words):
    """The documents of the library's files `paths`, then of the pydoc topics."""
    documents = []
    seen = set()
    for path in paths:
        for doc in _docstrings(path):
            sentences = _sentences(doc)
            if sum(len(s.split()) for s in sentences) >= min_words and doc not in seen:
                seen.add(doc)
                documents.append(sentences)
    from pydoc_data import topics  # lazy: 0.7 MB of help text, read only to write the corpus

    for key in sorted(topics.topics):
        sentences = _sentences(topics.topics[key])
        if sum(len(s.split()) for s in sentences) >= min_words:
            documents.append(sentences)
    return tuple(tuple(sentences) for sentences in documents)


def document_sources(min_words=20):
    """`{document text: source}` of the default corpus's documents, as
    `write_default_corpus` joins them ("\n" between sentences): the
    top-level module or package a docstring comes from ("email",
    "asyncio", ...), or "pydoc_topics". Parsed afresh, not cached (2.5 s):
    only tasks labelled by source need it."""
    stdlib = sysconfig.get_paths()["stdlib"]
    sources, seen = {}, set()
    for path in _source_files(stdlib):
        top = os.path.relpath(path, stdlib).split(os.sep)[0].removesuffix(".py")
        for doc in _docstrings(path):
            sentences = _sentences(doc)
            if sum(len(s.split()) for s in sentences) >= min_words and doc not in seen:
                seen.add(doc)
                sources.setdefault("\n".join(sentences), top)
    for document in default_documents(min_words):
        sources.setdefault("\n".join(document), "pydoc_topics")
    return sources


def write_default_corpus(folder, heldout_percent=5):
    """Writes `train.txt` and `heldout.txt` in `folder`; returns their paths
    and the number of documents on each side."""
    os.makedirs(folder, exist_ok=True)
    paths = {"train": os.path.join(folder, "train.txt"),
             "heldout": os.path.join(folder, "heldout.txt")}
    texts = {"train": [], "heldout": []}
    for sentences in default_documents():
        text = "\n".join(sentences)
        bucket = int(hashlib.sha256(text.encode()).hexdigest(), 16) % 100
        texts["heldout" if bucket < heldout_percent else "train"].append(text)
    for side, path in paths.items():
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("\n\n".join(texts[side]) + "\n")
        os.replace(tmp, path)
    return paths, {side: len(docs) for side, docs in texts.items()}


def split_long_lines(paths, count_tokens, max_tokens):
    """Rewrites each corpus file in `paths` whose lines run past `max_tokens`
    (as `count_tokens(text)` counts them), splitting each such line at word
    boundaries into consecutive lines of at most `max_tokens`, so that none
    is cut short in an instance and the writer has nothing to warn about. A
    single word longer than that stays whole on its own line. Returns the
    number of lines split; a file with none is left as it is (so a second
    call changes nothing). The files are the default corpus the package
    wrote, never a user's: a user's long lines are theirs to see warned."""
    split = 0
    for path in paths:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        out = []
        for line in lines:
            if not line or count_tokens(line) <= max_tokens:
                out.append(line)
                continue
            pieces, piece, size = [], [], 0
            for word in line.split():
                n = count_tokens(word)
                if piece and size + n > max_tokens:
                    pieces.append(" ".join(piece))
                    piece, size = [], 0
                piece.append(word)
                size += n
            pieces.append(" ".join(piece))
            split += len(pieces) > 1
            out += pieces
        if len(out) != len(lines):
            tmp = path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write("\n".join(out))
            os.replace(tmp, path)
    return split

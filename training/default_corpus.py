"""The default pretraining corpus, needing no download: the installed Python
standard library's docstrings plus `pydoc_data.topics`, in the pretraining
text format (one sentence per line, a blank line between documents).

Docstrings are read from the source files with `ast` (no module is imported,
so nothing runs). A document is one docstring or one pydoc topic with at
least `min_words` words. Documents are split into train and held out by a
hash of their text, so the split is the same on every machine and a
document never lands on both sides.
"""

import ast
import collections
import functools
import hashlib
import os
import re
import sysconfig

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

    Parsed once per process (about 2 s); later calls get a fresh
    copy of that result (Table 5 reads the corpus, then builds its tasks
    from the same documents).
    """
    return [list(sentences) for sentences in _documents(min_words)]


@functools.cache
def _documents(min_words):
    """`default_documents`, as tuples (nothing a caller can change)."""
    stdlib = sysconfig.get_paths()["stdlib"]
    documents = []
    seen = set()
    for root, dirs, files in os.walk(stdlib):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in sorted(files):
            if name.endswith(".py"):
                for doc in _docstrings(os.path.join(root, name)):
                    sentences = _sentences(doc)
                    if sum(len(s.split()) for s in sentences) >= min_words and doc not in seen:
                        seen.add(doc)
                        documents.append(sentences)
    from pydoc_data import topics

    for key in sorted(topics.topics):
        sentences = _sentences(topics.topics[key])
        if sum(len(s.split()) for s in sentences) >= min_words:
            documents.append(sentences)
    return tuple(tuple(sentences) for sentences in documents)


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

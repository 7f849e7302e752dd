import json
import os
import sysconfig

import pytest

from training.pretraining import default_corpus
from training.pretraining.default_corpus import default_documents


def test_documents_are_read_once_and_handed_out_as_copies():
    """The second call reuses the first one's documents, and no caller's
    change to its lists reaches another caller; a fresh parse of the
    library gives the same documents (whether the first came from the
    disk cache or not)."""
    default_corpus._documents.cache_clear()
    first = default_documents()
    assert len(first) > 2000 and all(isinstance(d, list) and d for d in first)
    kept = [list(d) for d in first[:3]]
    first[0].append("changed")
    first.append(["extra"])
    again = default_documents()
    assert default_corpus._documents.cache_info().hits == 1  # not read again
    assert again[:3] == kept and again[-1] != ["extra"] and len(again) == len(first) - 1
    stdlib = sysconfig.get_paths()["stdlib"]
    parsed = default_corpus._parse(list(default_corpus._source_files(stdlib)), 20)
    assert [list(d) for d in parsed] == again


def _module(path, doc):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'"""{doc}"""\n', encoding="utf-8")


def test_disk_cache_is_keyed_on_the_files_it_was_made_from(tmp_path, monkeypatch):
    """The parse is kept on disk and read back instead of parsing again; an
    edited file gives a new key and a new parse; a corrupt cache file is
    parsed past and rewritten; an unwritable cache folder is no error."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    lib = tmp_path / "lib"
    words = "The quick brown fox jumps over the lazy dog again and again. " * 3
    _module(lib / "a.py", "The first module. " + words)
    _module(lib / "tests" / "b.py", "The skipped folder. " + words)  # never read
    first = default_corpus._cached_documents(str(lib), 20)
    assert first[0][0] == "The first module." and not any("skipped folder" in d[0] for d in first)
    files = list((tmp_path / "cache").rglob("*.json"))
    assert len(files) == 1

    def no_parse(paths, min_words):
        raise AssertionError("parsed again")

    with monkeypatch.context() as patch:
        patch.setattr(default_corpus, "_parse", no_parse)
        assert default_corpus._cached_documents(str(lib), 20) == first  # from disk
        with pytest.raises(AssertionError, match="parsed again"):
            default_corpus._cached_documents(str(lib), 30)  # another min_words: another key

    _module(lib / "a.py", "The edited module. " + words)
    os.utime(lib / "a.py", ns=(1, 1))  # whatever the clock's resolution
    edited = default_corpus._cached_documents(str(lib), 20)
    assert edited[0][0] == "The edited module." and edited[1:] == first[1:]
    [newest] = set((tmp_path / "cache").rglob("*.json")) - set(files)
    newest.write_text("{not json", encoding="utf-8")
    assert default_corpus._cached_documents(str(lib), 20) == edited
    assert json.loads(newest.read_text(encoding="utf-8"))[0][0] == "The edited module."

    (tmp_path / "file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))  # a file: no folder here
    assert default_corpus._cached_documents(str(lib), 20) == edited


_EVERY_STATEMENT = '''
"""Module."""
import os
x = (lambda: 1) if os else 2
class A:
    """A."""
    def f(self):
        """A.f."""
        def g():
            """g in f."""
        return [i for i in range(3)]
    async def h(self):
        """A.h."""
        async with self as s:
            def in_async_with():
                """in async with."""
        async for i in s:
            class InAsyncFor:
                """in async for."""
if x:
    def in_if():
        """in if."""
elif x > 1:
    def in_elif():
        """in elif."""
else:
    class InElse:
        """in else."""
try:
    def in_try():
        """in try."""
except ValueError:
    def in_except():
        """in except."""
else:
    def in_try_else():
        """in try's else."""
finally:
    def in_finally():
        """in finally."""
try:
    pass
except* OSError:
    def in_except_star():
        """in except*."""
for i in []:
    def in_for():
        """in for."""
else:
    def in_for_else():
        """in for's else."""
while False:
    def in_while():
        """in while."""
with open(__file__) as f:
    def in_with():
        """in with."""
match x:
    case 1:
        def in_case():
            """in case."""
    case _ if x:
        class InGuardedCase:
            """in guarded case."""
@(lambda c: c)
class Decorated:
    """decorated."""
    class Nested:
        """nested."""
        def deep(self):
            """deep."""
'''


def test_docstrings_are_ast_walks_in_its_order():
    """The pruned walk (statements only) finds `ast.walk`'s docstrings in
    its order: in every compound statement, and in real files."""
    import ast
    import inspect
    import json

    def walked(tree):
        return [d for n in ast.walk(tree) if isinstance(n, default_corpus._DOCUMENTED)
                for d in [ast.get_docstring(n)] if d]

    tree = ast.parse(_EVERY_STATEMENT)
    found = list(default_corpus._tree_docstrings(tree))
    assert found == walked(tree) and len(found) == 24
    for module in (ast, inspect, json.decoder):
        tree = ast.parse(inspect.getsource(module))
        assert list(default_corpus._tree_docstrings(tree)) == walked(tree), module


def test_long_lines_split_at_word_boundaries_once(tmp_path):
    """A line over the limit becomes consecutive lines within it, words
    whole and in order; a word over the limit stands alone; documents keep
    their blank lines; a second call finds nothing to split."""
    from training.pretraining.default_corpus import split_long_lines

    path = tmp_path / "train.txt"
    path.write_text("a b c d e f g\nab\n\nh i jjjjjjjjj k\n")
    # One token per character, spaces aside.
    assert split_long_lines([str(path)], lambda t: len(t.replace(" ", "")), 3) == 2
    assert path.read_text() == "a b c\nd e f\ng\nab\n\nh i\njjjjjjjjj\nk\n"
    before = path.stat().st_mtime_ns
    assert split_long_lines([str(path)], lambda t: len(t.replace(" ", "")), 3) == 0
    assert path.stat().st_mtime_ns == before

from training import default_corpus
from training.default_corpus import default_documents


def test_documents_are_parsed_once_and_handed_out_as_copies():
    """The second call reuses the first one's parse, and no caller's change
    to its lists reaches another caller; a fresh parse gives the same."""
    default_corpus._documents.cache_clear()
    first = default_documents()
    assert len(first) > 2000 and all(isinstance(d, list) and d for d in first)
    kept = [list(d) for d in first[:3]]
    first[0].append("changed")
    first.append(["extra"])
    again = default_documents()
    assert default_corpus._documents.cache_info().hits == 1  # not parsed again
    assert again[:3] == kept and again[-1] != ["extra"] and len(again) == len(first) - 1
    default_corpus._documents.cache_clear()
    assert default_documents() == again


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

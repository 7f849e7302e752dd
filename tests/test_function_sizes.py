"""Two house rules read from the packages' source (no module is run): a
function past 60 lines says why in its docstring ("Over 60 lines: ..."), and
an import inside a function says why on its line or the line above
("# lazy: ..."), as a command's console must start before TensorFlow loads.

A function's length is its `def` to its last line, docstring included; a
nested function counts inside its parent and on its own.
"""

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("keras_bert_impl", "tf_records", "training")
MAX_LINES = 60
# The commands' deferred imports: each `python -m training.X` starts its
# console, then imports one runner; the records writers and the recipes defer
# TensorFlow the same way. The house's ceiling on how many there may be.
MAX_INNER_IMPORTS = 60


def _package_files():
    for package in PACKAGES:
        for folder, _, files in os.walk(os.path.join(ROOT, package)):
            for name in sorted(files):
                if name.endswith(".py"):
                    yield os.path.join(folder, name)


def long_functions_without_a_reason(path):
    """["path:line name (N lines)"] of the functions past `MAX_LINES` whose
    docstring does not say "Over 60 lines"."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_LINES and "Over 60 lines" not in (ast.get_docstring(node) or ""):
                found.append(f"{os.path.relpath(path, ROOT)}:{node.lineno} {node.name} "
                             f"({length} lines)")
    return found


def inner_imports(path):
    """[(where, has_reason)] for each import statement inside a function; the
    reason is `lazy:` on the import's first line or the line above."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    lines = text.splitlines()
    seen = {}
    for node in ast.walk(ast.parse(text, path)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    near = lines[sub.lineno - 1] + (lines[sub.lineno - 2] if sub.lineno > 1 else "")
                    seen[sub.lineno] = "lazy:" in near
    return [(f"{os.path.relpath(path, ROOT)}:{line}", reason) for line, reason in sorted(seen.items())]


def test_no_function_past_60_lines_without_a_reason():
    unexplained = [f for path in _package_files() for f in long_functions_without_a_reason(path)]
    assert not unexplained, "\n".join(unexplained)


def test_each_import_inside_a_function_says_why():
    found = [i for path in _package_files() for i in inner_imports(path)]
    assert [where for where, reason in found if not reason] == []
    assert len(found) < MAX_INNER_IMPORTS, len(found)


def test_the_checks_see_a_long_function_and_a_bare_inner_import(tmp_path):
    path = tmp_path / "m.py"
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES))
    path.write_text(
        f"def long():\n{body}\n"
        f'def explained():\n    """Over 60 lines: one table."""\n{body}\n'
        "def f():\n    import os\n"
        "def g():\n    # lazy: the console starts first\n    import sys\n")
    assert [f.split(" ")[1] for f in long_functions_without_a_reason(str(path))] == ["long"]
    assert [reason for _, reason in inner_imports(str(path))] == [False, True]

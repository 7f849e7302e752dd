"""A clone is the whole project: nothing in it reads a path above its own root.

A user's `git clone` has nothing beside it, so a test, script or module that
reads a folder beside the checkout (or climbs above it any other way) passes on a
developer's machine and fails for everyone else. Every tracked file is
searched for the folder names that would give it away, and every Python file
for the ways code climbs: a `..` path part in a string, `os.pardir`, and
`dirname(...)`/`.parent` chains from `__file__` that go higher than the file
is deep.
"""

import ast
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What a path outside the checkout looks like in this project's history.
# (Built from parts, so this file does not match itself.)
OUTSIDE = re.compile("|".join([r"\.\./" + "shared", "shared/" + "fixtures", "/work/" + "shared"]))
_DIRNAME = ("dirname",)


def _tracked():
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=ROOT, capture_output=True, check=True).stdout
    return [p for p in out.decode().split("\0") if p and os.path.isfile(os.path.join(ROOT, p))]


def _climbs(node):
    """How many folders up from `__file__` an expression goes, or None."""
    steps = 0
    while True:
        if isinstance(node, ast.Attribute) and node.attr == "parent":
            steps, node = steps + 1, node.value
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and (
                node.value.attr == "parents") and isinstance(node.slice, ast.Constant):
            steps, node = steps + node.slice.value + 1, node.value.value
        elif isinstance(node, ast.Call) and node.args and (
                getattr(node.func, "attr", getattr(node.func, "id", None)) in _DIRNAME):
            steps, node = steps + 1, node.args[0]
        elif isinstance(node, ast.Call) and node.args and (
                getattr(node.func, "attr", getattr(node.func, "id", None)) in (
                    "abspath", "realpath", "Path", "resolve", "normpath")):
            node = node.args[0]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                node.func.attr in ("resolve", "absolute")):
            node = node.func.value
        elif isinstance(node, ast.Name) and node.id == "__file__":
            return steps
        else:
            return None


def python_escapes(source, depth, name="<source>"):
    """Lines of `source` (a file `depth` folders below the root; 0 = at the
    root) that name a path above the root."""
    found = []
    tree = ast.parse(source, name)
    # An f-string's literal parts are text ("{a}..{b}"), not paths.
    in_fstrings = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)
                   for part in node.values}
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                re.search(r"(^|[\\/])\.\.[\\/]|[\\/]\.\.$", node.value)
                or (node.value == "." * 2 and id(node) not in in_fstrings)):
            found.append(f"{name}:{line}: the path part '..' in {node.value!r}")
        elif isinstance(node, ast.Attribute) and node.attr == "pardir":
            found.append(f"{name}:{line}: os.pardir")
        else:
            steps = _climbs(node) if isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)) \
                else None
            # `dirname(__file__)` is the file's folder (depth d): d + 1 steps reach the root's parent.
            if steps is not None and steps > depth + 1:
                found.append(f"{name}:{line}: {steps} folders up from __file__ "
                             f"(the file is {depth} below the root)")
    return found


def test_the_checker_finds_each_way_out():
    """A checker that finds nothing proves nothing: each way out is caught,
    and the project's own way to its root is not."""
    climbs = {
        'FIXTURE = os.path.join(ROOT, "..", "shared")': 1,
        'p = "../data/x.txt"': 1,
        'p = os.path.join(os.path.dirname(__file__), os.pardir)': 1,
        "ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))": 1,
        "ROOT = pathlib.Path(__file__).resolve().parent.parent.parent": 1,
        "ROOT = pathlib.Path(__file__).parents[2]": 1,
        "ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))": 0,
        "ROOT = pathlib.Path(__file__).parent.parent": 0,
        'x = "a/b.txt"': 0,
        'x = f"ids span {lo}..{hi}"': 0,
        'x = "wait..."': 0,
    }
    for source, expected in climbs.items():
        assert len(python_escapes(source, depth=1)) == expected, source
    assert OUTSIDE.search("see .." + "/shared/bilm-tf")


def test_no_file_reads_a_path_above_the_checkout():
    found = []
    for path in _tracked():
        full = os.path.join(ROOT, path)
        with open(full, "rb") as f:
            data = f.read()
        if b"\0" in data[:8192]:
            continue  # binary: weights, records
        text = data.decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{path}:{number}: {line.strip()[:100]}")
        if path.endswith(".py"):
            found += python_escapes(text, path.count("/"), path)
    assert not found, "Paths above the checkout:\n" + "\n".join(found)


@pytest.mark.parametrize("script", [".ci/env", ".ci/run"])
def test_ci_scripts_climb_only_to_the_root(script):
    """The shell scripts' one `..` is `.ci/`'s parent: the root itself."""
    with open(os.path.join(ROOT, script), encoding="utf-8") as f:
        text = f.read()
    to_root = '"$(dirname "${BASH_SOURCE[0]}")/.."'
    assert to_root in text
    assert not re.search(r"\.\./|/\.\.\b", text.replace(to_root, "")), script

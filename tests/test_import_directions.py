"""The house's import directions and file sizes, read from the source (no
module is run): each room imports only those below it, no family imports
another, no module reaches itself again through its imports, and a file
over 400 lines (a package's module, a test, a benchmark) says why.

Three packages are installed; two rooms inside them have rules of their own:

    keras_bert_impl          the library: models, layers, tokenizers, checkpoints
    tf_records.command_line  the console, progress lines, Keras' start-up trimming
    tf_records               the pretraining data writers and readers
    training.tasks           the fine-tuning tasks' readers and metrics
    training                 the commands and their recipes
"""

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What each room may import of ours besides itself; a module's room is the
# longest name here its own starts with.
ALLOWED = {
    "keras_bert_impl": set(),
    "tf_records.command_line": set(),
    "tf_records": {"keras_bert_impl", "tf_records.command_line"},
    "training.tasks": {"keras_bert_impl"},
    "training": {"keras_bert_impl", "tf_records", "tf_records.command_line", "training.tasks"},
}
PACKAGES = ("keras_bert_impl", "tf_records", "training")
FAMILIES = ("bert", "gpt", "elmo", "xlnet")
# Besides the packages, the 400-line rule reads these folders' Python files.
SIZED_FOLDERS = ("tests", "benchmarks")


def _room(module):
    return max((r for r in ALLOWED if module == r or module.startswith(r + ".")), key=len)


def _modules():
    """{module name: path} of every module in the packages above."""
    found = {}
    for package in PACKAGES:
        for folder, _, files in os.walk(os.path.join(ROOT, package)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    module = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                    found[module.removesuffix(".__init__")] = path
    return found


def _imports(path, modules):
    """[(line, module)]: what the file imports of ours, anywhere in it (a
    function's lazy import counts), each resolved to a module that exists."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from package import module` imports the module; `from module
            # import name`, the module.
            names = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules
                     else node.module for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in modules and name.split(".")[0] in PACKAGES:
                name = name.rpartition(".")[0]  # `import a.b.c` as far as it is ours
            if name in modules:
                found.append((node.lineno, name))
    return found


@pytest.fixture(scope="module")
def graph():
    modules = _modules()
    return modules, {m: _imports(path, modules) for m, path in modules.items()}


def _family(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in FAMILIES else None


def test_each_package_imports_only_those_below_it(graph):
    modules, imports = graph
    wrong = [f"{modules[m]}:{line} imports {target}"
             for m, found in imports.items() for line, target in found
             if _room(target) != _room(m) and _room(target) not in ALLOWED[_room(m)]]
    assert not wrong, "\n".join(wrong)


def test_the_rooms_are_where_the_rules_say():
    """Each room the rules name is a package folder (a move would otherwise
    leave its rule reading nothing)."""
    for room in ALLOWED:
        assert os.path.isfile(os.path.join(ROOT, *room.split("."), "__init__.py")), room


def test_no_family_imports_another(graph):
    modules, imports = graph
    wrong = [f"{modules[m]}:{line} imports {target}"
             for m, found in imports.items() for line, target in found
             if _family(m) and _family(target) and _family(m) != _family(target)]
    assert not wrong, "\n".join(wrong)


SHARED_ROOMS = tuple(f"keras_bert_impl.{room}" for room in (
    "base", "layers", "speed", "tokenizers", "checkpoints", "losses", "metrics", "file_modes"))


def test_the_shared_rooms_import_no_family(graph):
    """What every family shares (`base/`, `layers/`, `speed/`, `tokenizers/`,
    `checkpoints/`, the losses and metrics) imports no family's folder
    (`bert/`, `gpt/`, `elmo/`, `xlnet/`): BERT is a family like the others."""
    modules, imports = graph
    families = tuple(f"keras_bert_impl.{f}" for f in FAMILIES)
    wrong = [f"{modules[m]}:{line} imports {target}"
             for m, found in imports.items() if m.startswith(SHARED_ROOMS)
             for line, target in found if target.startswith(families)]
    assert not wrong, "\n".join(wrong)


def test_each_family_has_its_folder():
    """`keras_bert_impl/bert/` sits beside `gpt/`, `elmo/` and `xlnet/`."""
    for family in FAMILIES:
        assert os.path.isfile(os.path.join(ROOT, "keras_bert_impl", family, "__init__.py")), family


def test_run_machinery_imports_neither_pretraining_nor_finetuning(graph):
    """`training.run` is what every command shares: it sits below both."""
    modules, imports = graph
    wrong = [f"{modules[m]}:{line} imports {target}"
             for m, found in imports.items() if m.startswith("training.run.")
             for line, target in found
             if target.split(".")[:2] in (["training", "pretraining"], ["training", "finetuning"])]
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle(graph):
    """Tarjan's strongly connected components over every import; the edge
    from a package's modules to its `__init__` (Python runs it first) is
    left out, as `__init__` only gathers its modules' names."""
    _, imports = graph
    edges = {m: sorted({t for _, t in found if t != m and not m.startswith(t + ".")})
             for m, found in imports.items()}
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    assert not cycles, cycles


def test_the_checks_see_a_wrong_import(tmp_path):
    """The resolver finds a lazy upward import inside a function."""
    path = tmp_path / "m.py"
    path.write_text("def f():\n    from training.console import run\n")
    modules = {"training": "", "training.console": ""}
    assert _imports(str(path), modules) == [(2, "training.console")]


def _sized_files(modules):
    """The packages' modules and every Python file under `SIZED_FOLDERS`."""
    paths = set(modules.values())
    for top in SIZED_FOLDERS:
        for folder, folders, files in os.walk(os.path.join(ROOT, top)):
            folders[:] = [f for f in folders if not f.startswith((".", "__"))]
            paths.update(os.path.join(folder, name) for name in files if name.endswith(".py"))
    return sorted(paths)


def test_a_file_over_400_lines_says_why_at_its_top(graph):
    """The house rule: past about 400 lines a file holds two rooms unless its
    docstring says why not ("Over 400 lines: ..."): the packages' modules,
    the tests and the benchmarks."""
    modules, _ = graph
    unexplained = []
    for path in _sized_files(modules):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        docstring = ast.get_docstring(ast.parse(text)) or ""
        if text.count("\n") > 400 and "Over 400 lines" not in docstring:
            unexplained.append(f"{path}: {text.count(chr(10))} lines")
    assert not unexplained, "\n".join(unexplained)


def test_the_documented_import_paths_still_work():
    """The guides' paths (`keras_bert_impl.tokenizers`, `.checkpoints`,
    `.serving`, the top level) give BERT's own objects."""
    import keras_bert_impl
    from keras_bert_impl import bert
    from keras_bert_impl import checkpoints
    from keras_bert_impl import serving
    from keras_bert_impl import tokenizers

    for name in ("BertTokenizer", "BertPreprocessor", "GraphBertTokenizer", "load_vocab"):
        assert getattr(tokenizers, name) is getattr(bert, name), name
    for name in ("load_backbone", "find_vocab_file", "load_hf_checkpoint", "save_hf_checkpoint",
                 "load_google_checkpoint", "save_google_checkpoint", "load_keras_hub_preset",
                 "save_keras_hub_preset", "keras_hub_preset_vocab"):
        assert getattr(checkpoints, name) is getattr(bert, name), name
    assert serving.export_saved_model is bert.export_saved_model
    for name in ("BertConfig", "BertBackbone", "BertClassifier", "BertPretrainer", "preset"):
        assert getattr(keras_bert_impl, name) is getattr(bert, name), name
    with pytest.raises(AttributeError, match="no attribute 'Missing'"):
        tokenizers.Missing  # noqa: B018

"""The README and the guides in docs/ against the code (STYLE.md 20): what
they name exists and their examples run, so a renamed file, module or flag
breaks the build, not the reader.

Over 400 lines: one checker of the pages against the code, about 45 of them
this docstring; its checks read each page once (`page`, cached), and the
command checks share the module-scoped `defined_flags` (every documented
command's flags, read in one subprocess).

Pages: README.md and docs/*.md (not docs/results/, which
`tests/test_ablation_results.py` checks against its JSON). On each page:

- links: every relative markdown link names a file or folder of the
  checkout, and an `#anchor` one of the target page's headings;
- paths: every repository path in backticks or in a code block exists. A
  path is a token with a `/` whose first part is a top-level entry git
  tracks (`training/pretrain.py`, `tests/data/news/`, `.ci/env`), or one
  ending in `.py`, `.md` or `.ipynb`; globs must match something. Other
  tokens (`pretrain_output/export`, `corpus/*.txt`, `dist/<wheel>`) are what
  the commands write or the reader brings, and are not checked;
- dotted names in backticks under our packages (`training.pretrain`,
  `keras_bert_impl.bert.load_backbone`) name a module, and what
  follows the module a name defined in its source;
- commands: every `python -m <module>`, `python benchmarks/<script>.py` and
  `kbi-*` command in a shell block or a backticked span names a module or
  script that exists and only flags it defines (`--name`, or `--noname` for
  a boolean). The flags are read by running the command's own entry point
  with `absl.app.run` and `tf_records.command_line.console.run` stubbed (so its `main`
  never runs), in one subprocess: flags made from dataclass fields
  (`training.run.config_flags.define_flags`) and absl flags defined directly
  are read the same way. `tf_records.beam_pretraining_data` also takes
  Beam's pipeline options. A backticked flag on its own (`--phase2_steps=N`)
  must be a flag of some documented command;
- Python blocks: every ```python block runs, as a script in a fresh folder
  where `tests/` is the checkout's (so `tests/goldens/...` resolves and
  what the block writes lands in the folder), forked from the tests'
  TensorFlow server (`forked_python`); a block that cannot run here (it
  needs a download, a run's output, hours) is marked by the comment
  `<!-- not run: reason -->` right before it, and every such comment gives
  its reason and precedes a Python block. Fenced blocks carry a language, so
  no Python hides in an untagged block.

And the README stays a front door: its first code block holds the main job
and CI's own command (`.ci/run`'s last line), it links every guide, and it
is at most `README_MAX_LINES` lines.
"""

import ast
import functools
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
import tomllib

import pytest
from forked_python import run_python

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
PAGES = ["README.md"] + sorted(f"docs/{name}" for name in os.listdir(DOCS) if name.endswith(".md"))
README_MAX_LINES = 220
OUR_PACKAGES = ("keras_bert_impl", "training", "tf_records")


def _top_level():
    """The checkout's top-level entries that git tracks (not the output folders a
    command run in the checkout leaves): a path starting with one is the checkout's."""
    try:
        files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                               check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):  # no git: the project's own entries
        files = ["keras_bert_impl", "training", "tf_records", "tests", "benchmarks",
                 "examples", "docs", ".ci", "README.md", "pyproject.toml", "requirements.txt"]
    return {path.split("/")[0] for path in files}


TOP_LEVEL = _top_level()
SOURCE_SUFFIXES = (".py", ".md", ".ipynb")
LANGUAGES = ("bash", "python", "text", "json")
SHELL = ("bash",)
NOT_RUN = re.compile(r"<!--\s*not run:(.*?)-->", re.S)

FENCE = re.compile(r"^( *)```([^\n`]*)\n(.*?)^\1```[ \t]*$", re.M | re.S)
SPAN = re.compile(r"(?<!`)`([^`]+)`(?!`)")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
PATH_TOKEN = re.compile(r"[\w.*~<>{}-]*/[\w.*/<>{}-]*")
DOTTED = re.compile(r"^(?:{})(?:\.[A-Za-z_]\w*)+$".format("|".join(OUR_PACKAGES)))
FLAG_ONLY = re.compile(r"^--[A-Za-z_]\w*(=\S*)?(\s+--[A-Za-z_]\w*(=\S*)?)*$")


class Page:
    """A markdown page split into its fenced blocks and its prose (the text
    with the blocks blanked, line numbers kept)."""

    def __init__(self, name):
        self.name = name
        with open(os.path.join(ROOT, name), encoding="utf-8") as f:
            self.text = f.read()
        self.blocks = []  # (language, code, line, not-run reason or None)
        prose = self.text
        for match in FENCE.finditer(self.text):
            line = self.text.count("\n", 0, match.start()) + 1
            before = self.text[:match.start()].rstrip()
            marker = NOT_RUN.search(before[before.rfind("\n") + 1:]) if before.endswith("-->") \
                else None
            reason = marker.group(1).strip() if marker else None
            code = textwrap.dedent(match.group(3))  # a block inside a list item is indented
            self.blocks.append((match.group(2).strip(), code, line, reason))
            blank = re.sub(r"[^\n]", " ", match.group(0))
            prose = prose[:match.start()] + blank + prose[match.end():]
        self.prose = re.sub(r"<!--.*?-->", lambda m: re.sub(r"[^\n]", " ", m.group(0)), prose,
                            flags=re.S)

    def spans(self):
        """(text, line) of every inline code span, line breaks as spaces."""
        for match in SPAN.finditer(self.prose):
            yield " ".join(match.group(1).split()), self.prose.count("\n", 0, match.start()) + 1

    def links(self):
        for match in LINK.finditer(self.prose):
            yield match.group(1), self.prose.count("\n", 0, match.start()) + 1

    def where(self, line):
        return f"{self.name}:{line}"


@functools.cache
def page(name):
    return Page(name)


def _slug(heading):
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(name):
    return {_slug(h) for h in HEADING.findall(page(name).prose)}


# --- links and paths ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", PAGES)
def test_relative_links_exist(name):
    here = os.path.dirname(os.path.join(ROOT, name))
    broken = []
    for target, line in page(name).links():
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(here, path)) if path else os.path.join(ROOT, name)
        if not os.path.exists(full):
            broken.append(f"{page(name).where(line)}: {target} (no such file)")
        elif anchor and full.endswith(".md"):
            if anchor not in _anchors(os.path.relpath(full, ROOT)):
                broken.append(f"{page(name).where(line)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def _path_tokens(text):
    """Repository paths named in `text` (see the module docstring)."""
    for token in PATH_TOKEN.findall(text):
        token = token.rstrip(".,:;")
        if not token or token.startswith(("/", "~", "//")) or re.search(r"[<>{}]", token):
            continue
        first = token.split("/")[0]
        if first in TOP_LEVEL or token.endswith(SOURCE_SUFFIXES):
            yield token


def _exists(path):
    full = os.path.join(ROOT, path)
    return bool(glob.glob(full)) if "*" in path else os.path.exists(full)


@pytest.mark.parametrize("name", PAGES)
def test_repository_paths_exist(name):
    doc = page(name)
    named = [(text, line) for text, line in doc.spans() if "://" not in text]
    named += [(code, line) for lang, code, line, _ in doc.blocks]
    missing = [f"{doc.where(line)}: {path}" for text, line in named
               for path in _path_tokens(re.sub(r"\S*://\S*", " ", text)) if not _exists(path)]
    assert not missing, "no such file in the checkout:\n" + "\n".join(missing)


def _defined_names(source_file):
    """Top-level names of a Python file, and the names in each class's body."""
    with open(source_file, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    names, members = set(), {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            if isinstance(node, ast.ClassDef):
                members[node.name] = {n.name for n in node.body if isinstance(
                    n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))} | {
                    t.id for n in node.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                    for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                    if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names, members


def _dotted_name_problem(dotted):
    """None if `dotted` names a module of ours (and a name defined in it), else why not."""
    parts = dotted.split(".")
    path = os.path.join(ROOT, parts[0])
    for index, part in enumerate(parts[1:], start=1):
        if os.path.isdir(os.path.join(path, part)):
            path = os.path.join(path, part)
            continue
        if os.path.isfile(os.path.join(path, part + ".py")):
            path = os.path.join(path, part + ".py")
            continue
        source = path if path.endswith(".py") else os.path.join(path, "__init__.py")
        names, members = _defined_names(source)
        if part not in names:
            return f"{part!r} is not defined in {os.path.relpath(source, ROOT)}"
        rest = parts[index + 1:]
        if rest and part in members and rest[0] not in members[part]:
            return f"{part}.{rest[0]!r} is not defined in {os.path.relpath(source, ROOT)}"
        return None
    if not (path.endswith(".py") or os.path.isfile(os.path.join(path, "__init__.py"))):
        return f"{os.path.relpath(path, ROOT)} is not a module"
    return None


@pytest.mark.parametrize("name", PAGES)
def test_dotted_names_exist(name):
    doc = page(name)
    problems = []
    for text, line in doc.spans():
        for token in re.split(r"[\s(),=]+", text):
            token = token.rstrip(".:")
            if DOTTED.match(token):
                problem = _dotted_name_problem(token)
                if problem:
                    problems.append(f"{doc.where(line)}: `{token}`: {problem}")
    assert not problems, "\n".join(problems)


# --- commands and their flags ------------------------------------------------------------------

# Runs each command's entry point with `absl.app.run` and `tf_records.command_line.console.run`
# stubbed, collects the flags it defined, then deletes them for the next one.
_FLAG_READER = r"""
import json, os, runpy, sys
from absl import app, flags
from tf_records.command_line import console

class Stop(Exception):
    pass

def stop(*args, **kwargs):
    raise Stop

app.run = console.run = stop
app.define_help_flags()  # --help, --helpfull: app.run defines them
values = flags.FLAGS
before = set(values)
found = {}
for target in sys.argv[1:]:
    try:
        if target.endswith(".py"):
            sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
            sys.argv[0] = target
            runpy.run_path(target, run_name="__main__")
        else:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        found[target] = {"error": "its entry point calls neither app.run nor console.run"}
    except Stop:
        found[target] = {"flags": sorted(values), "booleans": sorted(
            name for name in values if values[name].boolean)}
    except BaseException as e:
        found[target] = {"error": f"{type(e).__name__}: {e}"}
    for name in set(values) - before:
        delattr(values, name)
if "tf_records.beam_pretraining_data" in found:
    from apache_beam.options.pipeline_options import PipelineOptions
    found["beam pipeline options"] = {"flags": sorted(PipelineOptions([]).get_all_options()),
                                      "booleans": []}
print("FLAGS-JSON " + json.dumps(found))
"""


def _console_scripts():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    return {name: entry.split(":")[0] for name, entry in scripts.items()}


def _shell_lines(code):
    """`(offset, command line)` of a shell block: continuations joined, and a
    quoted string over several lines kept whole."""
    lines, start, pending = [], 0, ""
    for offset, line in enumerate(code.split("\n")):
        if not pending:
            start = offset
        pending += line
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        try:
            shlex.split(pending, comments=True)
        except ValueError:  # an open quote: the command goes on
            pending += "\n"
            continue
        lines.append((start, pending))
        pending = ""
    if pending:
        lines.append((start, pending))
    return lines


def _commands(text):
    """`(target, args)` of each of our commands on a shell line: target is a
    module (`python -m training.pretrain`, `kbi-pretrain`) or a script path
    (`python benchmarks/pretrain_step.py`)."""
    try:
        tokens = shlex.split(text, comments=True)
    except ValueError as e:
        yield f"not a shell line ({e}): {text}", None
        return
    scripts = _console_scripts()
    for index, token in enumerate(tokens):
        target = None
        if os.path.basename(token) in ("python", "python3") and index + 1 < len(tokens):
            following = tokens[index + 1]
            if following == "-m" and index + 2 < len(tokens):
                module = tokens[index + 2]
                if module.split(".")[0] in OUR_PACKAGES:
                    target, start = module, index + 3
            elif following.startswith("benchmarks/") and following.endswith(".py"):
                target, start = following, index + 2
        elif index == 0 and token.startswith("benchmarks/") and token.endswith(".py"):
            target, start = token, 1  # a script named with its flags: `benchmarks/x.py --a=1`
        elif token.startswith("kbi-"):
            if token not in scripts:
                yield f"{token}: no such command in pyproject.toml", None
                continue
            target, start = scripts[token], index + 1
        if target:
            args = []
            for arg in tokens[start:]:
                if arg in ("|", "&&", "||", ";", "--") or arg.startswith((">", "<")):
                    break
                args.append(arg)
            yield target, args


def _documented_commands():
    """{target: [(where, flag), ...]} over every page, the lone flags
    `[(where, flag)]` in backticks, and the lines that name no command of
    ours though they look like one."""
    commands, lone, problems = {}, [], []
    for name in PAGES:
        doc = page(name)
        lines = [(text, line) for text, line in doc.spans()]
        for lang, code, line, _ in doc.blocks:
            if lang in SHELL:
                lines += [(text, line + 1 + offset) for offset, text in _shell_lines(code)]
        for text, line in lines:
            if FLAG_ONLY.match(text):
                lone += [(doc.where(line), arg) for arg in shlex.split(text)]
                continue
            for target, args in _commands(text):
                if args is None:  # `target` says what is wrong
                    problems.append(f"{doc.where(line)}: {target}")
                    continue
                commands.setdefault(target, []).extend(
                    (doc.where(line), arg) for arg in args if arg.startswith("--"))
    return commands, lone, problems


@pytest.fixture(scope="module")
def defined_flags():
    """{target: {"flags": [...], "booleans": [...]} or {"error": ...}} for every
    documented command and every console script."""
    commands, _, _ = _documented_commands()
    targets = sorted(set(commands) | set(_console_scripts().values()))
    result = subprocess.run([sys.executable, "-c", _FLAG_READER, *targets], cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3"),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(x for x in result.stdout.splitlines() if x.startswith("FLAGS-JSON "))
    return json.loads(line.removeprefix("FLAGS-JSON "))


def _flag_problem(arg, known, booleans):
    name = arg[2:].split("=")[0]
    if name in known:
        return None
    if name.startswith("no") and name[2:] in booleans and "=" not in arg:
        return None
    return f"{arg}: no flag --{name}"


def test_documented_commands_and_flags_exist(defined_flags):
    commands, _, problems = _documented_commands()
    assert "training.pretrain" in commands and "training.finetune" in commands
    beam = set(defined_flags.get("beam pipeline options", {}).get("flags", ()))
    for target, uses in sorted(commands.items()):
        found = defined_flags[target]
        if "error" in found:
            problems.append(f"{uses[0][0] if uses else ''}: {target}: {found['error']}")
            continue
        known = set(found["flags"]) | (beam if target == "tf_records.beam_pretraining_data"
                                       else set())
        for where, arg in uses:
            problem = _flag_problem(arg, known, set(found["booleans"]))
            if problem:
                problems.append(f"{where}: {target} {problem}")
    assert not problems, "\n".join(problems)


# Flags of other programs the guides name: TF Serving's model server.
OTHER_PROGRAMS_FLAGS = {"tensorflow_intra_op_parallelism", "tensorflow_inter_op_parallelism",
                        "xla_cpu_compilation_enabled"}


def test_lone_flags_belong_to_a_documented_command(defined_flags):
    _, lone, _ = _documented_commands()
    known, booleans = set(OTHER_PROGRAMS_FLAGS), set()
    for found in defined_flags.values():
        known |= set(found.get("flags", ()))
        booleans |= set(found.get("booleans", ()))
    problems = [f"{where}: {problem}" for where, arg in lone
                if (problem := _flag_problem(arg, known, booleans))]
    assert not problems, "\n".join(problems)


# --- code blocks -------------------------------------------------------------------------------


def _python_blocks():
    for name in PAGES:
        for lang, code, line, reason in page(name).blocks:
            if lang == "python":
                yield pytest.param(code, reason, id=f"{name}:{line}")


@pytest.mark.parametrize("name", PAGES)
def test_blocks_have_a_language_and_not_run_has_a_reason(name):
    doc = page(name)
    problems = [f"{doc.where(line)}: a fenced block without a language from {LANGUAGES}"
                for lang, _, line, _ in doc.blocks if lang not in LANGUAGES]
    markers = len(NOT_RUN.findall(doc.text))
    skipped = [(lang, line, reason) for lang, _, line, reason in doc.blocks
               if reason is not None]
    problems += [f"{doc.where(line)}: `not run` without a reason" for _, line, reason in skipped
                 if not reason]
    problems += [f"{doc.where(line)}: `not run` before a {lang} block (only Python blocks run)"
                 for lang, line, _ in skipped if lang != "python"]
    if markers != len(skipped):
        problems.append(f"{name}: {markers - len(skipped)} `not run` comment(s) not right "
                        "before a code block")
    assert not problems, "\n".join(problems)


# Blocks marked `not run` are not collected (no skip that could hide a
# failure): the test above checks that each marker gives its reason.
@pytest.mark.parametrize("code, reason", [p for p in _python_blocks() if p.values[1] is None])
def test_python_block_runs(code, reason, tmp_path):
    os.symlink(os.path.join(ROOT, "tests"), tmp_path / "tests")
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3", HF_HUB_OFFLINE="1")
    result = run_python(["-c", code], str(tmp_path), env, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]


# --- the README --------------------------------------------------------------------------------


def test_readme_is_the_front_door():
    readme = page("README.md")
    first = next(code for lang, code, _, _ in readme.blocks if lang in SHELL)
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        ci = [line for line in f.read().splitlines() if line.strip()][-1]
    assert "bash .ci/env python -m training.pretrain\n" in first, first
    assert "bash .ci/run\n" in first or ci in first, (ci, first)
    assert ci == "bash .ci/env python -m pytest -q -n 2 --maxschedchunk=1 --durations=15", ci
    guides = {name for name in PAGES if name.startswith("docs/")}
    linked = {os.path.normpath(target.partition("#")[0]) for target, _ in readme.links()}
    assert guides <= linked, f"guides the README does not link: {sorted(guides - linked)}"
    lines = readme.text.count("\n")
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines (at most {README_MAX_LINES}): move details to a guide "
        "in docs/ and link it.")

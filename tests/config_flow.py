"""Where `training/pretrain.py:run`'s config travels, read with `ast` (no
module is imported), and where that path climbs back up to a caller's room;
`python tests/config_flow.py [ROOT]` prints a checkout's climbs.
Over 400 lines: one reader, whose name resolution and path rules work only
together.

Rooms: a module's package folder (`training/pretraining/command/runner.py`:
`training.pretraining.command`). Room A is above B when A imports B (a lazy import
too), directly or through other rooms, and B does not import A back; or
when `test_import_directions.ALLOWED` lets A's package import B's. A
registry's string (`"training.bert.recipe"`) is no import.

The config: the start's `cfg`; in a callee, the parameter that got it; a
name bound to `dataclasses.replace` of it, to a carrier's `.cfg`, or to what
a function returns when its `return` gives the config (a tuple's element
too), in any branch. A carrier: an object made by calling a class with the
config (`Resolved(cfg, ...)`). A field
(`cfg.model`) is not the config.

Followed: a call of ours with the config or a carrier among its arguments,
or a method called on a carrier. Callees are resolved through names and
absolute imports (lazy ones too), a class's `__init__` and methods along its
bases, `super()`, `type(obj)(...)`, and what functions return (`_steps()`: a
module; `importlib.import_module(families[model]).RECIPE` over a dict of
module names: each family's recipe). Each callee is read the same way,
depth first, once per path. A nested function (`at_start`, `dataset_fn`)
is read where it is defined, with its parent's names (the config it
captures travels with it), and again where called by name. Not followed:
lambdas, carriers in containers (`data.phase2`), what cannot be resolved
(`getattr`, callable attributes), relative imports, other packages.

A climb: a call edge between rooms whose callee's room is on the path
already ("back": the path went down from it) or above the caller's ("up").
The total counts distinct edges (call site, callee).
"""

import ast
import os
import sys

from test_import_directions import ALLOWED

PACKAGES = ("keras_bert_impl", "tf_records", "training")
CFG = ("cfg",)
_DEPTH = 40  # return-value inference nesting, to be safe


def _modules(root, packages):
    paths = [os.path.join(folder, name) for package in packages
             for folder, _, files in os.walk(os.path.join(root, package))
             for name in files if name.endswith(".py")]
    return {os.path.relpath(path, root)[:-3].replace(os.sep, ".").removesuffix(".__init__"): path
            for path in paths}


class Project:
    """The modules under `root`, their names, rooms and room order."""

    def __init__(self, root, packages=PACKAGES, rules=None):
        self.root, self.rules, self._index = root, ALLOWED if rules is None else rules, {}
        self.paths = _modules(root, packages)
        self._order = self._room_order()

    def room(self, module):
        return module if self.paths[module].endswith("__init__.py") else module.rpartition(".")[0]

    def rel(self, module):  # its file, from the root
        return os.path.relpath(self.paths[module], self.root)

    def index(self, module):
        """(tree, {name: node of a def, class or assigned value}, {alias: import})."""
        if module not in self._index:
            with open(self.paths[module], encoding="utf-8") as f:
                tree = ast.parse(f.read(), self.paths[module])
            defs, imports = {}, {}
            for node in tree.body:
                if isinstance(node, ast.FunctionDef | ast.ClassDef):
                    defs[node.name] = node
                elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                    defs[node.targets[0].id] = node.value
                elif isinstance(node, ast.Import | ast.ImportFrom):
                    imports.update(self.import_names(node))
            self._index[module] = (tree, defs, imports)
        return self._index[module]

    def import_names(self, node):
        """{alias: ("mod", name) | ("from", module, name) | ("ext", dotted)}."""
        if isinstance(node, ast.Import):
            names = {a.asname or a.name.split(".")[0]: a.name if a.asname else
                     a.name.split(".")[0] for a in node.names}
            return {k: ("mod" if v in self.paths else "ext", v) for k, v in names.items()}
        base = node.module or ""
        return {a.asname or a.name: ("from", base, a.name) if base in self.paths else
                ("ext", f"{base}.{a.name}") for a in node.names}

    def resolve_import(self, target):
        return self.global_name(*target[1:]) if target[0] == "from" else {target}

    def global_name(self, module, name):
        """The atoms a module-level `name` of `module` stands for."""
        _, defs, imports = self.index(module)
        node = defs.get(name)
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            return {("func" if isinstance(node, ast.FunctionDef) else "class", module, name)}
        if isinstance(node, ast.Name):
            return self.global_name(module, node.id)
        if isinstance(node, ast.Dict) and node.values and all(
                isinstance(v, ast.Constant) and isinstance(v.value, str) for v in node.values):
            return {("dict", frozenset(v.value for v in node.values))}
        if name in imports:
            return self.resolve_import(imports[name])
        return {("mod", f"{module}.{name}")} if f"{module}.{name}" in self.paths else set()

    def class_node(self, cls):
        return self.index(cls[1])[1][cls[2]]

    def dotted(self, module, node):
        """The atoms of a module-level `a` or `a.b` (a class's base)."""
        if isinstance(node, ast.Name):
            return self.global_name(module, node.id)
        if isinstance(node, ast.Attribute):
            return {a for m in self.dotted(module, node.value) if m[0] == "mod"
                    for a in self.global_name(m[1], node.attr)}
        return set()

    def mro(self, cls):
        """The class and its bases that are ours, left first."""
        order, todo = [], [cls]
        while todo:
            c = todo.pop(0)
            if c not in order:
                order.append(c)
                todo.extend(a for base in self.class_node(c).bases
                            for a in self.dotted(c[1], base) if a[0] == "class")
        return order

    def method(self, cls, name, after=None):
        """("func", module, "Class.name") found along `cls`'s bases (after `after`)."""
        order = self.mro(cls)
        if after is not None:
            order = order[order.index(after) + 1:] if after in order else []
        for c in order:
            for node in self.class_node(c).body:
                if isinstance(node, ast.FunctionDef) and node.name == name:
                    return ("func", c[1], f"{c[2]}.{name}")
        return None

    def func_node(self, func):
        defs, (owner, _, name) = self.index(func[1])[1], func[2].rpartition(".")
        return defs[name] if not owner else next(
            n for n in defs[owner].body if isinstance(n, ast.FunctionDef) and n.name == name)

    def _room_order(self):
        """{room: the rooms it reaches through imports}."""
        edges = {}
        for module in self.paths:
            for node in ast.walk(self.index(module)[0]):
                for target in (self.import_names(node) if isinstance(
                        node, ast.Import | ast.ImportFrom) else {}).values():
                    name = target[1]
                    if target[0] == "from" and f"{name}.{target[2]}" in self.paths:
                        name = f"{name}.{target[2]}"
                    while name and name not in self.paths:
                        name = name.rpartition(".")[0]
                    if name and self.room(name) != self.room(module):
                        edges.setdefault(self.room(module), set()).add(self.room(name))
        reach = {}
        for start in edges:
            reach[start], todo = set(), list(edges[start])
            while todo:
                if (r := todo.pop()) not in reach[start]:
                    reach[start].add(r)
                    todo.extend(edges.get(r, ()))
        return reach

    def _rule(self, room):
        return max((r for r in self.rules if room == r or room.startswith(r + ".")),
                   key=len, default=None)

    def above(self, a, b):
        """Whether room `a` is above room `b`."""
        if b in self._order.get(a, ()) and a not in self._order.get(b, ()):
            return True
        ra, rb = self._rule(a), self._rule(b)
        return ra is not None and rb is not None and ra != rb and rb in self.rules[ra]


def _carries(value):
    return any(a == CFG or a[0] == "inst" or (a[0] == "tuple" and any(map(_carries, a[1])))
               for a in value)


class Flow:
    """Follows the config from a start function; `climbs`: {(site, callee): (rooms, why)}."""

    def __init__(self, project):
        self.p, self.climbs, self.edges, self._inferring, self._memo = project, {}, set(), [], {}
        self._closures, self._open = {}, set()

    def run_function(self, func, bindings, path, follow):
        """Reads `func`'s body with `bindings` ({param: atoms}); its return's atoms."""
        node = self.p.func_node(func)
        env = {alias: self.p.resolve_import(target) for stmt in ast.walk(node)  # lazy imports too
               if isinstance(stmt, ast.Import | ast.ImportFrom)
               for alias, target in self.p.import_names(stmt).items()} | bindings
        frame = {"func": func, "env": env, "path": path, "follow": follow, "returns": set(),
                 "cls": ("class", func[1], func[2].rpartition(".")[0]) if "." in func[2]
                 else None, "self": node.args.args[0].arg if node.args.args else None}
        for stmt in node.body:
            self.statement(stmt, frame, False)
        return frame["returns"]

    def bind(self, func, args, kwargs, self_value=None):
        node = self._closures[func[1]][0] if func[0] == "closure" else self.p.func_node(func)
        params = [a.arg for a in node.args.posonlyargs + node.args.args]
        if self_value is not None and params:
            args = [self_value, *args]
        out = {name: value for name, value in zip(params, args) if value}
        names = set(params) | {a.arg for a in node.args.kwonlyargs}
        return out | {k: v for k, v in kwargs.items() if k in names and v}

    def invoke(self, func, bindings, site, frame):
        """A call of `func`: an edge when the config rides in; its return's atoms."""
        if frame["follow"] and any(_carries(v) for v in bindings.values()):
            self.edge(func, site, frame)
            if any(f == func for f, _ in frame["path"]):
                return set()
            return self.run_function(func, bindings, frame["path"] + [(func, site)], True)
        key = (func, tuple(sorted((k, frozenset(v)) for k, v in bindings.items())))
        if key not in self._memo and key not in self._inferring and len(
                self._inferring) < _DEPTH:  # what it returns, read once
            self._inferring.append(key)
            self._memo[key] = self.run_function(func, bindings, frame["path"], False)
            self._inferring.pop()
        return self._memo.get(key, set())

    def edge(self, callee, site, frame):
        caller = frame["func"]  # "up" and "back" below: see the module's docstring
        caller_room, callee_room = self.p.room(caller[1]), self.p.room(callee[1])
        key = (f"{self.p.rel(caller[1])}:{site}", f"{callee[1]}.{callee[2]}")
        self.edges.add(key)
        if callee_room == caller_room or key in self.climbs:
            return
        on_path = [self.p.room(f[1]) for f, _ in frame["path"]]
        why = [w for w, hit in (("back", callee_room in on_path),
                                ("up", self.p.above(callee_room, caller_room))) if hit]
        if why:
            chain = on_path + [callee_room]
            rooms = " > ".join(r for i, r in enumerate(chain) if not i or r != chain[i - 1])
            self.climbs[key] = (f"{caller[1]}.{caller[2]}", rooms, "+".join(why))

    def statement(self, stmt, frame, merge):
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):  # read now and when called
            frame["env"][stmt.name] = {("closure", id(stmt))}
            self._closures[id(stmt)] = (stmt, frame)
            self.closure(id(stmt), {})
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            return
        if isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign):
            value = self.eval(stmt.value, frame) if stmt.value else set()
            for target in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                if not isinstance(stmt, ast.AugAssign):
                    self.assign(target, value, frame, merge)
        elif isinstance(stmt, ast.Return) and stmt.value is not None:
            frame["returns"] |= self.eval(stmt.value, frame)
        elif isinstance(stmt, ast.Expr | ast.Raise | ast.Assert | ast.Delete):
            for child in ast.iter_child_nodes(stmt):
                self.eval(child, frame)
        else:  # if, for, while, with, try, match: every branch, in order
            for field, value in ast.iter_fields(stmt):
                items = value if isinstance(value, list) else [value]
                for item in items:
                    if isinstance(item, ast.stmt):
                        self.statement(item, frame, True)
                    elif isinstance(item, ast.excepthandler):
                        for sub in item.body:
                            self.statement(sub, frame, True)
                    elif isinstance(item, ast.withitem):
                        self.eval(item.context_expr, frame)
                    elif isinstance(item, ast.expr) and field != "target":
                        self.eval(item, frame)

    def closure(self, key, bindings):
        """A nested function's return: its body read with its parent's names as they are now."""
        node, outer = self._closures[key]
        if key in self._open:
            return set()
        params = {a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs}
        frame = dict(outer, returns=set(), env={
            k: v for k, v in outer["env"].items() if k not in params} | bindings)
        self._open.add(key)
        for stmt in node.body:
            self.statement(stmt, frame, False)
        self._open.discard(key)
        return frame["returns"]

    def assign(self, target, value, frame, merge):
        env = frame["env"]
        if isinstance(target, ast.Name):
            env[target.id] = (env.get(target.id, set()) | value) if merge else set(value)
        elif isinstance(target, ast.Tuple | ast.List):
            parts = [set() for _ in target.elts]
            for atom in value:
                if atom[0] == "tuple" and len(atom[1]) == len(parts):
                    for part, element in zip(parts, atom[1]):
                        part |= element
            for element, part in zip(target.elts, parts):
                self.assign(element, part, frame, merge)

    def eval(self, expr, frame):
        if isinstance(expr, ast.Name):
            if expr.id in frame["env"]:
                return set(frame["env"][expr.id])
            if expr.id in ("type", "super"):
                return {("builtin", expr.id)}
            return self.p.global_name(frame["func"][1], expr.id)
        if isinstance(expr, ast.Attribute):
            return self.attribute(self.eval(expr.value, frame), expr.attr)
        if isinstance(expr, ast.Call):
            return self.call(expr, frame)
        if isinstance(expr, ast.Tuple):
            return {("tuple", tuple(frozenset(self.eval(e, frame)) for e in expr.elts))}
        if isinstance(expr, ast.Subscript):  # a registry's entry, a tuple's element
            base, _ = self.eval(expr.value, frame), self.eval(expr.slice, frame)
            i = expr.slice.value if isinstance(expr.slice, ast.Constant) else None
            return {("str", s) for a in base if a[0] == "dict" for s in a[1]} | {
                e for a in base if a[0] == "tuple" and isinstance(i, int) and -len(a[1]) <= i < len(
                    a[1]) for e in a[1][i]}
        if isinstance(expr, ast.IfExp):
            self.eval(expr.test, frame)
            return self.eval(expr.body, frame) | self.eval(expr.orelse, frame)
        if isinstance(expr, ast.BoolOp):
            return set().union(*(self.eval(v, frame) for v in expr.values))
        if isinstance(expr, ast.NamedExpr):
            value = self.eval(expr.value, frame)
            self.assign(expr.target, value, frame, True)
            return value
        if isinstance(expr, ast.Constant):
            return {("str", expr.value)} if isinstance(expr.value, str) else set()
        if isinstance(expr, ast.Lambda):
            return set()
        for child in ast.iter_child_nodes(expr):  # calls inside other expressions
            if isinstance(child, ast.expr):
                self.eval(child, frame)
            elif isinstance(child, ast.comprehension):
                for part in [child.iter, *child.ifs]:
                    self.eval(part, frame)
        return set()

    def attribute(self, base, attr):
        out = set()
        for atom in base:
            if atom[0] == "mod":
                out |= self.p.global_name(atom[1], attr)
            elif atom[0] == "ext":
                out.add(("ext", f"{atom[1]}.{attr}"))
            elif atom[0] == "class" and (method := self.p.method(atom, attr)):
                out.add(method)
            elif atom[0] == "inst":
                method = self.p.method(atom[1], attr)
                out |= {CFG} if attr == "cfg" else {("bound", atom, method)} if method else set()
            elif atom[0] == "super" and (method := self.p.method(atom[2][1], attr, atom[1])):
                out.add(("bound", atom[2], method))
        return out

    def call(self, node, frame):
        func = self.eval(node.func, frame)
        args = [self.eval(a, frame) for a in node.args]  # a *starred one: its place unknown
        args = args[:next((i for i, a in enumerate(node.args) if isinstance(a, ast.Starred)),
                          len(args))]
        kwargs = {kw.arg: self.eval(kw.value, frame) for kw in node.keywords}
        kwargs.pop(None, None)
        first = args[0] if args else set()
        out, site = set(), node.lineno
        for atom in func:
            if atom == ("ext", "dataclasses.replace"):
                out |= first & {CFG}
            elif atom == ("ext", "importlib.import_module"):
                out |= {("mod", a[1]) for a in first if a[0] == "str" and a[1] in self.p.paths}
            elif atom == ("builtin", "type"):
                out |= {a[1] for a in first if a[0] == "inst"}
            elif atom == ("builtin", "super") and frame["cls"] and frame["self"]:
                out |= {("super", frame["cls"], a) for a in frame["env"].get(frame["self"], ())
                        if a[0] == "inst"}
            elif atom[0] == "func":
                out |= self.invoke(atom, self.bind(atom, args, kwargs), site, frame)
            elif atom[0] == "bound":
                out |= self.invoke(atom[2], self.bind(atom[2], args, kwargs, {atom[1]}), site,
                                   frame)
            elif atom[0] == "class":
                out |= self.construct(atom, args, kwargs, site, frame)
            elif atom[0] == "closure":
                out |= self.closure(atom[1], self.bind(atom, args, kwargs))
        return out

    def construct(self, cls, args, kwargs, site, frame):
        if not any(map(_carries, [*args, *kwargs.values()])):
            return set()
        instance, init = ("inst", cls), self.p.method(cls, "__init__")
        if init:
            self.invoke(init, self.bind(init, args, kwargs, {instance}), site, frame)
        elif frame["follow"]:  # a dataclass: the edge, nothing to read
            self.edge(("func", cls[1], f"{cls[2]}.__init__"), site, frame)
        return {instance}


def measure(root, start=("training.pretrain", "run"), param="cfg", packages=PACKAGES,
            rules=None):
    """The `Flow` of `start`'s `param` in the checkout `root`."""
    flow, func = Flow(Project(root, packages, rules)), ("func", *start)
    flow.run_function(func, {param: {CFG}}, [(func, 0)], True)
    return flow


def report(flow):
    lines = [f"{site} {caller} -> {callee}  [{why}; {rooms}]"
             for (site, callee), (caller, rooms, why) in sorted(flow.climbs.items())]
    lines.append(f"{len(flow.climbs)} climbs over {len(flow.edges)} config call edges")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(measure(sys.argv[1] if len(sys.argv) > 1 else
                         os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

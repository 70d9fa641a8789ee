"""Static layering figures for the lmpt package (stdlib ast only): import graph, import circles, arrows up the layers,
lmpt imports per module, the root config's walk from the training entry point, objective names compared outside
lmpt/objectives/; inside lmpt/downstream/, its files, floors and arrows (and any arrow up its own floors), and task-kind
names compared outside lmpt/downstream/kinds/.
Run: python scripts/layering.py [--package DIR] [--json FILE] [--fail-on-cycles] [--max-up N]"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import Counter, defaultdict, namedtuple
from pathlib import Path

# Lowest layer first. A module belongs to the first group whose prefix matches (whole dotted components); a top-level
# name such as "lmpt" matches only the package __init__ itself.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "foundation",
        (
            "lmpt.errors",
            "lmpt.console",
            "lmpt.rng",
            "lmpt.safe_files",
            "lmpt.cores",
            "lmpt.locks",
            "lmpt.stopping",
            "lmpt.private_api",
            "lmpt",
        ),
    ),
    ("config", ("lmpt.config",)),
    ("tokenizer", ("lmpt.tokenizer",)),
    ("data", ("lmpt.data", "lmpt.quality")),  # quality: the dedup and filter step of the data path
    ("batch", ("lmpt.batch",)),
    ("model", ("lmpt.model",)),
    ("objectives", ("lmpt.objectives",)),
    ("rundir", ("lmpt.rundir",)),
    ("hf", ("lmpt.hf",)),
    ("train", ("lmpt.train",)),
    ("inference", ("lmpt.inference",)),
    ("downstream", ("lmpt.downstream",)),
    ("report", ("lmpt.report",)),
    (
        "entry",
        (
            "lmpt.preview",
            "lmpt.prepare",
            "lmpt.app",
            "lmpt.cli",
            "lmpt.__main__",
            "lmpt.commands",
            "lmpt.study",
            "lmpt.reproduce",
        ),
    ),
)
SUBPACKAGE = "downstream"
"""The package whose own floors are measured apart (`package_figures`)."""
SUB_FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("figures", ("figures", "significance", "seed_figures", "official")),  # names, metrics, statistics; no torch
    # where examples come from: files, bundled:NAME, lmpt-finetune's options, labelled tasks, GLUE's table and folders
    ("sources", ("labelled_files", "bundled", "options", "zero_shot_files", "labelled", "glue", "glue_files")),
    (  # the ways of scoring, shared by kinds: likelihood; fine-tuning and its parts; the floors; the untrained control
        "engines",
        (
            "control",
            "likelihood",
            "floors",
            "target",
            "encoding",
            "classifier",
            "seeds",
            "recipe",
            "control_cache",
            "finetune",
        ),
    ),
    ("task", ("task",)),  # what every task and result answers
    ("kinds", ("kinds",)),  # one module a kind, and their registry
    ("commands", ("records", "curves", "run_tasks", "eval_cli", "finetune_cli", "glue_suite")),
)
"""lmpt/downstream/'s floors, lowest first, as names inside it; its __init__ sits on the lowest."""
KINDS_HOME = "downstream.kinds"
"""Where the task kinds live: their names are compared nowhere else."""
WATCHED = ("lmpt.train.run",)  # always shown in the imports-per-module table
DEFAULT_ENTRY = "lmpt.cli:train:cfg"
CARRIERS = ("RunSpec",)
"""Types whose values carry the root config (their `.config`): a parameter annotated with one is walked too."""
FALLBACK_OBJECTIVES = ("clm", "mlm", "nsp", "span", "prefix", "ul2-mixture", "electra", "mtp", "fim")
ROOT_ATTRS = {"config", "root"}  # x.config / x.root of anything is the root config
ROOT_PRESERVING = {"deepcopy", "copy", "merge"}  # copy.deepcopy(cfg), OmegaConf.merge(cfg, ...) stay the root

Mod = namedtuple("Mod", "name path tree is_pkg")  # path relative to the package's parent: "lmpt/train/run.py"
# type_only: every import of dst in src sits under `if TYPE_CHECKING:`; lazy: every one sits inside a function
Edge = namedtuple("Edge", "src dst type_only lazy line")
Func = namedtuple("Func", "mod cls node")  # cls: "module:Class" for a method, else None


def load_package(root: Path) -> dict[str, Mod]:
    root, mods = Path(root), {}
    for path in sorted(root.rglob("*.py")):
        parts = (root.name, *path.relative_to(root).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_pkg else parts)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        mods[name] = Mod(name, str(path.relative_to(root.parent)), tree, is_pkg)  # path: "lmpt/x/y.py"
    return mods


def _longest_module(dotted: str, mods: dict[str, Mod]) -> str | None:
    prefixes = (dotted.rsplit(".", n)[0] for n in range(dotted.count(".") + 1))
    return next((p for p in prefixes if p in mods), None)


def _imports(node: ast.AST, type_only: bool = False, lazy: bool = False):
    """Yields (import node, type_only, lazy) for every import statement under node."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node, type_only, lazy
    elif isinstance(node, ast.If) and "TYPE_CHECKING" in (getattr(node.test, "id", 0), getattr(node.test, "attr", 0)):
        for child in node.body:
            yield from _imports(child, True, lazy)
        for child in node.orelse:
            yield from _imports(child, type_only, lazy)
    else:
        inner = lazy or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            yield from _imports(child, type_only, inner)


def _from_base(mod: Mod, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = mod.name.split(".") if mod.is_pkg else mod.name.split(".")[:-1]
    return ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))


def _bound(mod: Mod, node: ast.Import | ast.ImportFrom) -> list[tuple[str, str]]:
    """(local name, dotted target) per name the import binds; the target may be a module or module.symbol."""
    if isinstance(node, ast.Import):
        return [(a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0]) for a in node.names]
    return [(a.asname or a.name, f"{_from_base(mod, node)}.{a.name}") for a in node.names if a.name != "*"]


def _import_targets(mod: Mod, node: ast.Import | ast.ImportFrom, mods: dict[str, Mod]) -> set[str]:
    """Modules imported: `from x import name` is x.name when that is a module, else x."""
    if isinstance(node, ast.Import):
        dotted = [a.name for a in node.names]
    else:
        base = _from_base(mod, node)
        dotted = [base if a.name == "*" else f"{base}.{a.name}" for a in node.names]
    return {m for m in (_longest_module(d, mods) for d in dotted) if m and m != mod.name}


def import_graph(mods: dict[str, Mod]) -> list[Edge]:
    seen: dict[tuple[str, str], list[tuple[bool, bool, int]]] = defaultdict(list)
    for mod in mods.values():
        for node, type_only, lazy in _imports(mod.tree):
            for dst in _import_targets(mod, node, mods):
                seen[mod.name, dst].append((type_only, lazy, node.lineno))
    edges = []
    for (src, dst), occ in sorted(seen.items()):
        type_only = all(t for t, _, _ in occ)
        lazy = all(lz for t, lz, _ in occ if t == type_only)
        edges.append(Edge(src, dst, type_only, lazy, min(line for t, _, line in occ if t == type_only)))
    return edges


def cycles(edges: list[Edge], runtime_only: bool = True) -> list[list[str]]:
    """Strongly connected components of more than one module: the modules that reach each other."""
    graph: dict[str, set[str]] = defaultdict(set)
    for e in edges:
        if not (runtime_only and e.type_only):
            graph[e.src].add(e.dst)
    reach: dict[str, set[str]] = {}
    for v in list(graph):
        reach[v], todo = set(), [v]
        while todo:
            new = graph.get(todo.pop(), set()) - reach[v]
            reach[v] |= new
            todo += new
    comps = {tuple(sorted(w for w in reach[v] if v in reach.get(w, ()))) for v in graph if v in reach[v]}
    return sorted(list(c) for c in comps if len(c) > 1)


def layer_of(name: str, layers=LAYERS) -> int | None:
    for i, (_, prefixes) in enumerate(layers):
        if any(name == p or ("." in p and name.startswith(p + ".")) for p in prefixes):
            return i
    return None


def up_arrows(edges: list[Edge], layers=LAYERS) -> list[dict]:
    """Imports from a lower layer to a higher one (modules in no layer are reported apart)."""
    ups = []
    for e in edges:
        src, dst = layer_of(e.src, layers), layer_of(e.dst, layers)
        if src is not None and dst is not None and src < dst:
            ups.append({**e._asdict(), "src_layer": layers[src][0], "dst_layer": layers[dst][0]})
    return ups


class Index:
    """Module-level functions, classes and import bindings of every module, for static call resolution."""

    def __init__(self, mods: dict[str, Mod]) -> None:
        self.mods, self.funcs, self.classes, self.bindings = mods, {}, {}, {}
        for mod in mods.values():  # bindings: every import in the module, lazy ones too, as if module-wide
            self.bindings[mod.name] = {n: t for node, _, _ in _imports(mod.tree) for n, t in _bound(mod, node)}
            for node in mod.tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.funcs[f"{mod.name}:{node.name}"] = Func(mod.name, None, node)
                elif isinstance(node, ast.ClassDef):
                    self.classes[f"{mod.name}:{node.name}"] = node
                    for item in node.body:
                        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                            key = f"{mod.name}:{node.name}.{item.name}"
                            self.funcs[key] = Func(mod.name, f"{mod.name}:{node.name}", item)

    def resolve(self, dotted: str, depth: int = 0) -> str | None:
        """A dotted name to "module:func", "module:Class" or "module:Class.method", following re-exports."""
        mod = _longest_module(dotted, self.mods)
        rest = dotted[len(mod) + 1 :].split(".") if mod and dotted != mod else []
        if not rest or depth > 10:
            return None
        key = f"{mod}:{rest[0]}"
        if key in self.funcs and len(rest) == 1:
            return key
        if key in self.classes and len(rest) <= 2:
            return key if len(rest) == 1 else self.method(key, rest[1])
        target = self.bindings[mod].get(rest[0])
        return self.resolve(".".join([target, *rest[1:]]), depth + 1) if target else None

    def method(self, cls: str, name: str, skip_own: bool = False, depth: int = 0) -> str | None:
        if not skip_own and f"{cls}.{name}" in self.funcs:
            return f"{cls}.{name}"
        mod = cls.split(":")[0]
        for base in self.classes[cls].bases if depth < 10 else []:
            found = self.resolve(self.dotted(base, mod) or "")
            if found in self.classes and (hit := self.method(found, name, depth=depth + 1)):
                return hit
        return None

    def dotted(self, expr: ast.expr, mod: str) -> str | None:
        """`a.b.c` as seen from module mod: a bound import or a module-level name of mod, then .b.c."""
        attrs = []
        while isinstance(expr, ast.Attribute):
            attrs.insert(0, expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name):
            return None
        head = self.bindings[mod].get(expr.id)
        if head is None and (f"{mod}:{expr.id}" in self.funcs or f"{mod}:{expr.id}" in self.classes):
            head = f"{mod}.{expr.id}"
        return ".".join([head, *attrs]) if head else None

    def callee(self, call: ast.Call, fn: Func) -> str | None:
        f = call.func
        if isinstance(f, ast.Attribute) and fn.cls:
            if isinstance(f.value, ast.Name) and f.value.id in ("self", "cls"):
                return self.method(fn.cls, f.attr)
            if isinstance(f.value, ast.Call) and isinstance(f.value.func, ast.Name) and f.value.func.id == "super":
                return self.method(fn.cls, f.attr, skip_own=True)
        found = self.resolve(self.dotted(f, fn.mod) or "")
        return (self.method(found, "__init__") or found) if found in self.classes else found


def _targets(stmt: ast.stmt) -> list[ast.expr]:
    return stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []


def _pairs(stmt: ast.stmt) -> list[tuple[ast.expr, ast.expr]]:
    """(target, value) of an assignment, a tuple paired element by element: `self.cfg, self.t = cfg, cfg.trainer`."""
    value, out = stmt.value, []
    for t in _targets(stmt):
        same = isinstance(t, ast.Tuple) and isinstance(value, ast.Tuple) and len(t.elts) == len(value.elts)
        out += zip(t.elts, value.elts, strict=True) if same else [(t, value)]
    return out


def _is_root(expr: ast.expr, names: set[str], self_attrs: set[str]) -> bool:
    if isinstance(expr, ast.Name):
        return expr.id in names
    if isinstance(expr, ast.Attribute):
        return expr.attr in ROOT_ATTRS or (getattr(expr.value, "id", 0) == "self" and expr.attr in self_attrs)
    if isinstance(expr, ast.Call) and expr.args:
        name = expr.func.attr if isinstance(expr.func, ast.Attribute) else getattr(expr.func, "id", "")
        return name in ROOT_PRESERVING and _is_root(expr.args[0], names, self_attrs)
    return False


def _params(fn: Func) -> list[str]:
    names = [a.arg for a in fn.node.args.posonlyargs + fn.node.args.args]
    static = any(getattr(d, "id", None) == "staticmethod" for d in fn.node.decorator_list)
    return names[1:] if fn.cls and not static else names


def config_walk(mods: dict[str, Mod], entry: str = DEFAULT_ENTRY, layers=LAYERS) -> dict:
    """Follows the root config from entry ("module:function:param") through statically resolvable lmpt calls."""
    index, (module, func, param) = Index(mods), entry.split(":")
    start = f"{module}:{func}"
    if start not in index.funcs:
        raise SystemExit(f"error: entry {entry}: no function {func} in {module}")
    tainted: dict[str, set[str]] = defaultdict(set, {start: {param}})
    for key, fn in index.funcs.items():  # a record that carries the root config (RunSpec) is followed as the root
        args = fn.node.args.posonlyargs + fn.node.args.args + fn.node.args.kwonlyargs
        tainted[key] |= {a.arg for a in args if a.annotation is not None and ast.unparse(a.annotation) in CARRIERS}
    class_attrs: dict[str, set[str]] = defaultdict(set)
    edges: dict[tuple, str] = {}  # call site (function, line, column) -> callee
    unresolved: dict[tuple, str] = {}  # call site -> the callee as written
    work = [k for k, v in tainted.items() if v]
    while work:
        key = work.pop()
        fn = index.funcs[key]
        attrs = class_attrs[fn.cls] if fn.cls else set()
        names = set(tainted[key])
        pairs = [
            p for n in ast.walk(fn.node) if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value for p in _pairs(n)
        ]
        local_defs = {n.name for n in ast.walk(fn.node) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        while grown := {t.id for t, v in pairs if isinstance(t, ast.Name) and _is_root(v, names, attrs)} - names:
            names |= grown  # to a fixpoint: x = cfg; y = x
        for t in (t for t, v in pairs if _is_root(v, names, attrs)):
            if fn.cls and isinstance(t, ast.Attribute) and getattr(t.value, "id", 0) == "self" and t.attr not in attrs:
                class_attrs[fn.cls].add(t.attr)  # self.X = cfg: self.X is the root in every method of the class
                work += [k for k, f in index.funcs.items() if f.cls == fn.cls]
        for call in (n for n in ast.walk(fn.node) if isinstance(n, ast.Call)):
            pos = [i for i, a in enumerate(call.args) if not isinstance(a, ast.Starred) and _is_root(a, names, attrs)]
            kws = [k.arg for k in call.keywords if k.arg and _is_root(k.value, names, attrs)]
            if not pos and not kws:
                continue
            site = (key, call.lineno, call.col_offset)
            if isinstance(call.func, ast.Name) and call.func.id in local_defs:
                continue  # a nested function: its body is walked as part of this one
            target = index.callee(call, fn)
            if target is None:
                unresolved[site] = ast.unparse(call.func)
            elif edges.setdefault(site, target) in index.funcs:
                params = _params(index.funcs[target])  # positional ones, self/cls left out
                kwonly = {a.arg for a in index.funcs[target].node.args.kwonlyargs}
                new = {params[i] for i in pos if i < len(params)} | (set(kws) & (set(params) | kwonly))
                if not new <= tainted[target]:
                    tainted[target] |= new
                    work.append(target)
    reached = {k.split(":")[0] for k, p in tainted.items() if p} | {t.split(":")[0] for t in edges.values()}
    layer = lambda key: layer_of(key.split(":")[0], layers) or 0
    climbs = sorted(f"{s[0]} -> {t}" for s, t in edges.items() if layer(s[0]) < layer(t))
    return {
        "entry": entry,
        "files": sorted(mods[m].path for m in reached),
        "call_edges": len(edges),
        "climbs": climbs,
        "unresolved": len(unresolved),
        "unresolved_callees": dict(Counter(unresolved.values()).most_common()),
        "edges": sorted(f"{s[0]}:{s[1]} -> {t}" for s, t in edges.items()),
    }


def _in_home(mod: Mod, home: str = "objectives") -> bool:
    """Whether `mod` is in <pkg>/HOME/ (a dotted path under the package: "objectives", "downstream.kinds")."""
    parts = home.split(".")
    return mod.name.split(".")[1 : 1 + len(parts)] == parts


def _in_objectives(mod: Mod) -> bool:
    return _in_home(mod)


def objective_names(mods: dict[str, Mod], home: str = "objectives", attr: str = "name") -> list[str]:
    """The `name = "clm"` / `name: ClassVar[str] = "clm"` class attributes of the classes in <pkg>/HOME/ (the
    objectives by default; the fallback list when it has none); `attr`: the attribute that holds the name (a task
    kind's is `kind`)."""
    found = []
    for mod in (m for m in mods.values() if _in_home(m, home)):
        for cls in (n for n in ast.walk(mod.tree) if isinstance(n, ast.ClassDef)):
            for item in cls.body:
                if any(getattr(t, "id", 0) == attr for t in _targets(item)) and isinstance(item.value, ast.Constant):
                    found.append(item.value.value)
    names = sorted({f for f in found if isinstance(f, str) and f})
    return names or (list(FALLBACK_OBJECTIVES) if home == "objectives" else [])


def _literals(node: ast.AST, names: set[str]) -> list[ast.Constant]:
    """The objective-name string constants of node itself or of a tuple/list/set literal (or frozenset({...}))."""
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("frozenset", "set", "tuple") and node.args:
        node = node.args[0]
    elems = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [e for e in elems if isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value in names]


def objective_compares(mods: dict[str, Mod], names: list[str], home: str = "objectives") -> list[str]:
    """file:line of each source line outside <pkg>/HOME/ comparing (or keying on) one of `names` (objective names,
    or with home="downstream.kinds" task-kind names)."""
    wanted, hits = set(names), set()
    for mod in (m for m in mods.values() if not _in_home(m, home)):
        in_fstring = {id(n) for j in ast.walk(mod.tree) if isinstance(j, ast.JoinedStr) for n in ast.walk(j)}
        found: list[ast.Constant] = []
        for node in (n for n in ast.walk(mod.tree) if id(n) not in in_fstring):
            if isinstance(node, ast.Compare):  # "clm" == x, x in ("clm", "mlm"), but not attention == "prefix"
                lits = [(s, _literals(s, wanted)) for s in [node.left, *node.comparators]]
                if "attention" not in " ".join(ast.unparse(s) for s, lit in lits if not lit).lower():
                    found += [c for _, lit in lits for c in lit]
            elif isinstance(node, ast.Dict):  # keyed by objective: two or more keys are objective names
                keys = [k for k in node.keys if k is not None and _literals(k, wanted) == [k]]
                found += keys if len(keys) >= 2 else []
        for stmt in mod.tree.body:  # module-level constants: NAMES = ("clm", ...)
            if _targets(stmt) and stmt.value and not any(getattr(t, "id", 0) == "__all__" for t in _targets(stmt)):
                found += [c for c in _literals(stmt.value, wanted) if c is not stmt.value]
        hits |= {(mod.path, c.lineno) for c in found}
    return [f"{f}:{line}" for f, line in sorted(hits)]


def package_figures(
    mods: dict[str, Mod], edges: list[Edge], base: Path, sub: str = SUBPACKAGE, floors=SUB_FLOORS
) -> dict:
    """<pkg>/SUB/ on its own: its files and lines, its arrows (imports between its modules), its depth in floors (the
    longest chain of runtime imports inside it, counted in modules), its declared `floors` and any arrow up them.
    `base`: the folder holding the package (module paths are relative to it)."""
    root = f"{next(iter(mods)).split('.')[0]}.{sub}"
    inside = {n: m for n, m in mods.items() if n == root or n.startswith(root + ".")}
    arrows = [e for e in edges if e.src in inside and e.dst in inside]
    named = tuple((name, tuple(f"{root}.{p}" for p in prefixes)) for name, prefixes in floors)
    floor = {n: 0 if n == root else layer_of(n, named) for n in inside}  # the package's __init__: the lowest floor
    ups = [
        {**e._asdict(), "src_layer": named[floor[e.src]][0], "dst_layer": named[floor[e.dst]][0]}
        for e in arrows
        if floor[e.src] is not None and floor[e.dst] is not None and floor[e.src] < floor[e.dst]
    ]
    graph: dict[str, set[str]] = defaultdict(set)
    for e in arrows:
        if not e.type_only:
            graph[e.src].add(e.dst)
    depth: dict[str, int] = {}

    def chain(name: str, seen: frozenset[str] = frozenset()) -> int:  # a circle counts once, not forever
        if name not in depth:
            depth[name] = 1 + max((chain(d, seen | {name}) for d in graph[name] if d not in seen), default=0)
        return depth[name]

    lines = sum(len((base / m.path).read_text(encoding="utf-8").splitlines()) for m in inside.values())
    return {
        "package": root,
        "files": len(inside),
        "lines": lines,
        "arrows": len(arrows),
        "depth": max((chain(n) for n in inside), default=0),
        "floors": [name for name, _ in named],
        "unfloored": sorted(n for n, f in floor.items() if f is None),
        "up_arrows": ups,
    }


def analyse(root: Path, entry: str = DEFAULT_ENTRY, layers=LAYERS) -> dict:
    mods = load_package(root)
    edges = import_graph(mods)
    names = objective_names(mods)
    compares = objective_compares(mods, names)
    kinds = objective_names(mods, KINDS_HOME, "kind")
    has_sub = any(n.split(".")[1:2] == [SUBPACKAGE] for n in mods)
    kind_compares = objective_compares(mods, kinds, KINDS_HOME)
    fan = dict(sorted(Counter(e.src for e in edges).items(), key=lambda kv: (-kv[1], kv[0])))  # distinct targets
    return {
        "modules": len(mods),
        "import_edges": len(edges),
        "type_only_edges": sum(e.type_only for e in edges),
        "lazy_edges": sum(e.lazy and not e.type_only for e in edges),
        "unlayered": sorted(m for m in mods if layer_of(m, layers) is None),
        "cycles": cycles(edges),
        "cycles_including_type_only": cycles(edges, runtime_only=False),
        "up_arrows": up_arrows(edges, layers),
        "imports_per_module": fan,
        "config_walk": config_walk(mods, entry, layers) if entry.split(":")[0] in mods else None,
        "objective_names": names,
        "objective_compares": compares,
        "objective_compare_files": len({c.rsplit(":", 1)[0] for c in compares}),
        "subpackage": package_figures(mods, edges, Path(root).parent) if has_sub else None,
        "kind_names": kinds,
        "kind_compares": kind_compares,
    }


def report(fig: dict) -> str:
    ups, walk = fig["up_arrows"], fig["config_walk"]
    lines = [
        f"modules {fig['modules']}, import edges {fig['import_edges']} (type-only {fig['type_only_edges']}, "
        f"lazy {fig['lazy_edges']})",
        f"import circles (runtime): {len(fig['cycles'])}, including type-only "
        f"imports: {len(fig['cycles_including_type_only'])}",
    ]
    lines += [
        f"  {', '.join(c)}{'' if c in fig['cycles'] else '  (closed by a type-only import)'}"
        for c in fig["cycles_including_type_only"]
    ]
    lines.append(
        f"arrows up the layers: {len(ups)} (type-only {sum(u['type_only'] for u in ups)}, "
        f"lazy {sum(u['lazy'] for u in ups)})"
    )
    lines += [
        f"  {u['src']} [{u['src_layer']}] -> {u['dst']} [{u['dst_layer']}]{'  type-only' * u['type_only']}"
        f"{'  lazy' * u['lazy']}  (line {u['line']})"
        for u in ups
    ]
    fan = fig["imports_per_module"]
    top = list(fan)[:10] + [m for m in WATCHED if m not in list(fan)[:10]]
    lines += ["distinct lmpt modules imported (top 10):"] + [f"  {fan.get(m, 0):3d}  {m}" for m in top]
    if walk:
        lines.append(
            f"root config walk from {walk['entry']}: {len(walk['files'])} files, {walk['call_edges']} call "
            f"edges, {len(walk['climbs'])} climbs, {walk['unresolved']} unresolved calls skipped"
        )
        lines += [f"  file  {f}" for f in walk["files"]] + [f"  climb {c}" for c in walk["climbs"]]
        lines.append("  skipped: " + ", ".join(f"{name} x{n}" for name, n in walk["unresolved_callees"].items()))
    lines.append(
        f"objective names compared outside objectives/: {len(fig['objective_compares'])} lines in "
        f"{fig['objective_compare_files']} files (names: {', '.join(fig['objective_names'])})"
    )
    lines += [f"  {c}" for c in fig["objective_compares"]]
    sub = fig.get("subpackage")
    if sub:
        lines.append(
            f"{sub['package']}: {sub['files']} files, {sub['lines']} lines, {sub['arrows']} arrows between "
            f"them, {sub['depth']} floors deep (longest import chain); declared floors "
            f"{' < '.join(sub['floors'])}: {len(sub['up_arrows'])} arrows up, {len(sub['unfloored'])} modules "
            "on no floor"
        )
        lines += [f"  up {u['src']} [{u['src_layer']}] -> {u['dst']} [{u['dst_layer']}]" for u in sub["up_arrows"]]
        lines += [f"  no floor: {n}" for n in sub["unfloored"]]
    lines.append(
        f"task-kind names compared outside {KINDS_HOME.replace('.', '/')}/: {len(fig['kind_compares'])} lines "
        f"(names: {', '.join(fig['kind_names'])})"
    )
    lines += [f"  {c}" for c in fig["kind_compares"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--package", type=Path, default=Path(__file__).resolve().parents[1] / "lmpt")
    parser.add_argument("--entry", default=DEFAULT_ENTRY, help="module:function:param (default %(default)s)")
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    parser.add_argument("--fail-on-cycles", action="store_true", help="exit 1 on any runtime import circle")
    parser.add_argument("--max-up", type=int, help="exit 1 on more than N arrows up the layers (type-only included)")
    args = parser.parse_args(argv)
    fig = analyse(args.package, args.entry)
    print(report(fig))
    if args.json:
        args.json.write_text(json.dumps(fig, indent=2) + "\n")
    if fig["unlayered"]:
        print(f"error: modules in no layer (edit LAYERS): {', '.join(fig['unlayered'])}", file=sys.stderr)
        return 2
    too_many_up = args.max_up is not None and len(fig["up_arrows"]) > args.max_up
    return 1 if (args.fail_on_cycles and fig["cycles"]) or too_many_up else 0


if __name__ == "__main__":
    sys.exit(main())

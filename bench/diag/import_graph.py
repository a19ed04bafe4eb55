"""The import structure of agent/: modules and lines per package, import circles, and arrows that point up the layers.

    python bench/diag/import_graph.py [--root DIR] [--edges]

Every `import` counts, a function's lazy one included (it is still a dependency; only `if TYPE_CHECKING:` blocks are
left out, they never run). A circle is a strongly connected set of modules. An upward arrow is an import from a lower
layer (LAYERS below, bottom first) to a higher one: the types importing the loop, the judge importing a proposer.
Exit 0 always: this prints a picture, the lead compares two of them (before/after).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

# Bottom first. A module belongs to the first entry that is it or a package above it; an import from a lower layer
# into a higher one is an upward arrow. A module of types only (finding, store.records) is ground. Same-layer arrows are free (circles are reported on their own).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("ground: types and small helpers", ("agent", "agent.schema", "agent.errors", "agent.plural", "agent.printable",
                                         "agent.redact", "agent.datafiles", "agent.versions", "agent.protocols",
                                         "agent.runconfig", "agent.memory_entry", "agent.finding",
                                         "agent.store.records")),
    ("data: catalogs, problems, reports", ("agent.catalog", "agent.stages", "agent.problems", "agent.ncu",
                                           "agent.diagnosis", "agent.hostbound", "agent.crosscheck")),
    ("judge: the harness", ("agent.harness",)),
    ("services: profiler, store", ("agent.profiler", "agent.store")),
    ("proposer side", ("agent.offline", "agent.llm", "agent.inductor", "agent.memory", "agent.prompts",
                       "agent.search", "agent.ladder", "agent.starts")),
    ("loop", ("agent.loop", "agent.rounds")),
    ("edges: wiring, scale, config, commands, views", ("agent.config", "agent.wiring", "agent.scale", "agent.view",
                                                       "agent.rerender", "agent.suite",
                                                       "agent.commands", "agent.cli", "agent.__main__")),
]


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_lines(tree: ast.AST) -> set[int]:
    """Line numbers inside `if TYPE_CHECKING:` blocks."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                out.update(range(sub.lineno, (sub.end_lineno or sub.lineno) + 1))
    return out


def imports_of(path: Path, name: str, modules: set[str], is_package: bool) -> dict[str, bool]:
    """{imported agent module: lazy (only inside a function)} for one file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_lines(tree)
    lazy_nodes = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                  for n in ast.walk(f)}
    found: dict[str, bool] = {}
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = name.split(".") if is_package else name.split(".")[:-1]
                pkg = pkg[: len(pkg) - node.level + 1]
                base = ".".join(pkg + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        for t in targets:
            while t and t not in modules:  # `import agent.harness.job` names the module; a.b.attr names a.b
                t = t.rpartition(".")[0]
            if t and t != name:
                found[t] = found.get(t, True) and id(node) in lazy_nodes
    return found


def layer_of(module: str) -> int:
    for i, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or (p != "agent" and module.startswith(p + ".")) for p in prefixes):
            return i
    return len(LAYERS) - 1


def package_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected sets of more than one module (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2], help="the checkout (default: "
                    "this script's)")
    ap.add_argument("--edges", action="store_true", help="also list every module's imports")
    args = ap.parse_args()
    files = sorted((args.root / "agent").rglob("*.py"))
    names = {module_name(f, args.root): f for f in files}
    modules = set(names)
    graph: dict[str, set[str]] = {}
    lazy: dict[tuple[str, str], bool] = {}
    for name, path in names.items():
        found = imports_of(path, name, modules, path.name == "__init__.py")
        graph[name] = set(found)
        lazy.update({(name, t): is_lazy for t, is_lazy in found.items()})

    print("## modules per package (files, lines)")
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for name, path in names.items():
        per[package_of(name)][0] += 1
        per[package_of(name)][1] += len(path.read_text(encoding="utf-8").splitlines())
    for pkg, (n, lines) in sorted(per.items(), key=lambda kv: -kv[1][1]):
        print(f"  {pkg:28} {n:4} {lines:6}")
    print(f"  {'total':28} {sum(v[0] for v in per.values()):4} {sum(v[1] for v in per.values()):6}")

    found_circles = circles(graph)
    print(f"\n## circles ({len(found_circles)})")
    for comp in found_circles:
        members = set(comp)
        arrows = sorted(f"{a} -> {b}{' (lazy)' if lazy[(a, b)] else ''}" for a in comp for b in graph[a] if b in members)
        print(f"  {len(comp)} modules: " + ", ".join(comp))
        for arrow in arrows:
            print(f"      {arrow}")

    up = sorted((a, b) for a in graph for b in graph[a] if layer_of(b) > layer_of(a))
    print(f"\n## upward arrows ({len(up)}): a lower layer importing a higher one")
    for i, (title, _) in enumerate(LAYERS):
        print(f"  layer {i}: {title}")
    for a, b in up:
        print(f"  {a} [{layer_of(a)}] -> {b} [{layer_of(b)}]{' (lazy)' if lazy[(a, b)] else ''}")

    pkg_graph: dict[str, set[str]] = defaultdict(set)
    for a in graph:
        for b in graph[a]:
            if package_of(a) != package_of(b):
                pkg_graph[package_of(a)].add(package_of(b))
    for p in {package_of(m) for m in modules}:
        pkg_graph.setdefault(p, set())
    pkg_circles = circles(pkg_graph)
    print(f"\n## circles between packages ({len(pkg_circles)})")
    for comp in pkg_circles:
        print("  " + ", ".join(comp))
    if args.edges:
        print("\n## imports")
        for a in sorted(graph):
            print(f"  {a}: " + ", ".join(sorted(graph[a])))
    return 0


if __name__ == "__main__":
    sys.exit(main())

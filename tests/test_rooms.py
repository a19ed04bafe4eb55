"""agent/harness in rooms (docs/architecture.md): the worker's room runs inside the sandbox, next to the candidate, and
imports nothing of the parent's side: a worker that imported the static policy or the judge would load the parent's
decisions into the process the candidate controls."""

import ast
from pathlib import Path

import agent.harness

HARNESS = Path(agent.harness.__file__).parent
# what a worker may import of the harness: its own room, the job's contract (and its settings), the GPU's lock
ALLOWED = ("agent.harness.worker", "agent.harness.job", "agent.harness.settings", "agent.harness.wall.gpulock")


def imported(path: Path) -> set[str]:
    """Every module an import statement in `path` names, at any depth (a function's lazy import too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)  # `from agent.harness import judge`
    return names


def forbidden(name: str) -> bool:
    if name == "agent.harness" or not name.startswith("agent.harness."):
        return False
    return not any(name == a or name.startswith(a + ".") for a in ALLOWED)


def test_the_worker_imports_nothing_of_the_parents_side():
    files = sorted((HARNESS / "worker").glob("*.py"))
    assert len(files) >= 10
    found = {f"{f.name}: {n}" for f in files for n in imported(f) if forbidden(n)}
    assert not found, sorted(found)


def test_the_check_sees_a_lazy_import_of_the_judge(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from agent.harness.judge.validate import rel_error\n"
                     "from agent.harness import pipeline\nfrom agent.harness.worker.inputs import flatten\n")
    assert {n for n in imported(probe) if forbidden(n)} == {
        "agent.harness.judge.validate", "agent.harness.judge.validate.rel_error", "agent.harness.pipeline"}


def test_every_harness_module_lives_in_a_room_or_is_the_parents_orchestration():
    top = {p.stem for p in HARNESS.glob("*.py")}
    rooms = {p.name for p in HARNESS.iterdir() if (p / "__init__.py").is_file()}
    assert rooms == {"static", "wall", "worker", "judge"}
    assert top <= {"__init__", "pipeline", "evaluator", "job", "runner", "settings", "cache", "preflight", "prewarm",
                   "shared"}, sorted(top)

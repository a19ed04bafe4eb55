"""Build the sweep's input (bench/suite/sweep_public.py) from git directories of public KernelBench answers.

The answers are other people's code: they are read out of the fetched repositories into a git-ignored folder
(default ./.sweep) and never committed here. Each source is one folder: answers/, problems/ (the KernelBench problem
each answer was written against) and answers.json (answer -> problem, the source's repository and commit, the model
where the source says it).

    python bench/suite/sweep_collect.py --mirror /work/.mirror --out .sweep

Sources (repository@commit, where the answers are, which KernelBench problems they answer):
- dlblas-openevolve: DeepLink-org/DLBlas, branch add-kernelbench-triton, OpenEvolve's best program per problem
- dlblas-kernelagent: the same branch, a KernelAgent's answer per problem
- llmkernel: Alisehen/LLMKernel, per problem the runnable kernel its own evaluation scored best (else the last one),
  against the KernelBench copy of that repository
The DLBlas answers predate KernelBench's July 2025 resize: each is paired with the problem version (before or after
it) whose size globals its own trailing copy of the problem matches.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from pathlib import Path

DLBLAS, DLBLAS_REF = "DeepLink-org+DLBlas", "add-kernelbench-triton"
LLMKERNEL = "Alisehen+LLMKernel"
KERNELBENCH = "ScalingIntelligence+KernelBench"
KB_BEFORE_RESIZE = "21fbe5a"  # the last commit before b08d959 "scaled up the tensor sizes for level 1, 2 and 3"
_PROBLEM = re.compile(r"level(\d)[_/](\d+_[^/]+?)(?:\.py)?$")


class Git:
    def __init__(self, mirror: Path, name: str) -> None:
        self.dir = mirror / name / "repo"
        if not self.dir.is_dir():
            sys.exit(f"error: {self.dir} is not a fetched repository (fetch github:{name.replace('+', '/')} first)")

    def __call__(self, *args: str) -> str:
        return subprocess.run(["git", f"--git-dir={self.dir}", *args], check=True, capture_output=True,
                              text=True).stdout

    def files(self, ref: str, under: str) -> list[str]:
        return self("ls-tree", "-r", "--name-only", ref, under).splitlines()

    def show(self, ref: str, path: str) -> str:
        return self("show", f"{ref}:{path}")

    def commit(self, ref: str) -> str:
        return self("rev-parse", ref).strip()


def _int_globals(code: str) -> dict[str, int]:
    """Top-level `NAME = <int>` bindings (the problem's size globals, as an answer's trailing copy repeats them)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return {}
    out = {}
    for n in tree.body:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            try:
                v = ast.literal_eval(n.value)
            except ValueError:
                continue
            if type(v) is int:
                out[n.targets[0].id] = v
    return out


def _matches(answer: str, problem: str) -> int:
    mine, theirs = _int_globals(answer), _int_globals(problem)
    return sum(1 for k, v in mine.items() if theirs.get(k) == v)


class Writer:
    def __init__(self, out: Path, source: str, meta: dict[str, str]) -> None:
        self.root = out / source
        (self.root / "answers").mkdir(parents=True, exist_ok=True)
        (self.root / "problems").mkdir(parents=True, exist_ok=True)
        self.meta, self.answers = meta, {}  # type: ignore[var-annotated]

    def add(self, key: str, answer: str, problem: str, origin: str, model: str | None) -> None:
        a, p = f"answers/{key}.py", f"problems/{key}.py"
        (self.root / a).write_text(answer)
        (self.root / p).write_text(problem)
        self.answers[a] = {"problem": p, "origin": origin, "model": model}

    def close(self) -> int:
        doc = {**self.meta, "answers": dict(sorted(self.answers.items()))}
        (self.root / "answers.json").write_text(json.dumps(doc, indent=1) + "\n")
        return len(self.answers)


class KernelBench:
    """KernelBench's problem files at two versions: before the July 2025 resize and now."""

    def __init__(self, mirror: Path) -> None:
        self.git = Git(mirror, KERNELBENCH)
        self.head = self.git.commit("HEAD")
        self.before = self.git.commit(KB_BEFORE_RESIZE)
        self.paths = {ref: {m.group(1, 2): p for p in self.git.files(ref, "KernelBench")
                            if (m := _PROBLEM.search(p)) and p.endswith(".py")} for ref in (self.before, self.head)}

    def best(self, level: str, name: str, answer: str) -> tuple[str, str] | None:
        """(problem source, commit) whose size globals the answer's own copy matches best (ties: the older)."""
        found = [(self.git.show(ref, paths[(level, name)]), ref) for ref, paths in self.paths.items()
                 if (level, name) in paths]  # a problem since renamed or removed is in one version only
        return max(found, key=lambda f: _matches(answer, f[0]), default=None)  # max keeps the first (older) on ties


def collect_dlblas(mirror: Path, out: Path, kb: KernelBench) -> dict[str, int]:
    git = Git(mirror, DLBLAS)
    commit = git.commit(DLBLAS_REF)
    counts = {}
    for source, under in (("dlblas-openevolve", "dlblas/kernels/openEvolveOutput"),
                          ("dlblas-kernelagent", "dlblas/kernels/kernelagent")):
        w = Writer(out, source, {"source": source, "repo": "DeepLink-org/DLBlas", "commit": commit,
                                 "problems": f"ScalingIntelligence/KernelBench@{kb.before} or @{kb.head}"})
        for path in git.files(commit, under):
            m = _PROBLEM.search(path.removesuffix("/best/best_program.py"))
            if not m or (source == "dlblas-openevolve" and not path.endswith("best/best_program.py")):
                continue
            answer = git.show(commit, path)
            found = kb.best(*m.group(1, 2), answer)
            if found is None:
                print(f"  {source}: no KernelBench problem for {path}", file=sys.stderr)
                continue
            w.add(f"level{m.group(1)}_{m.group(2)}", answer, found[0], f"{path} (problem @{found[1][:7]})", None)
        counts[source] = w.close()
    return counts


def _llmkernel_pick(git: Git, commit: str, folder: str, kernels: list[str]) -> tuple[str, str | None]:
    """The kernel its own evaluation scored best among the runnable ones, else the last written; and the model."""
    best: tuple[float, str] | None = None
    model = None
    by_name = {k.rsplit("/", 1)[1]: k for k in kernels}
    for ev in git.files(commit, f"{folder}/evaluation"):
        if not re.search(r"/eval_\d+\.json$", ev):
            continue
        d = json.loads(git.show(commit, ev))
        cand = str(d.get("candidate_file", ""))
        run = re.search(r"batch_[^/]*?_([a-z0-9]+)_([a-z0-9]+)/", cand)
        model = f"{run.group(2)} (via {run.group(1)})" if run else model
        name = cand.rsplit("/", 1)[-1]
        score = d.get("score")
        if d.get("runnable") and name in by_name and isinstance(score, (int, float)):
            if best is None or score > best[0]:
                best = (float(score), by_name[name])
    return (best[1] if best else sorted(kernels)[-1]), model


def collect_llmkernel(mirror: Path, out: Path) -> dict[str, int]:
    git = Git(mirror, LLMKERNEL)
    commit = git.commit("HEAD")
    w = Writer(out, "llmkernel", {"source": "llmkernel", "repo": "Alisehen/LLMKernel", "commit": commit,
                                  "problems": f"Alisehen/LLMKernel@{commit}:KernelBench/"})
    kernels: dict[str, list[str]] = {}
    for p in git.files(commit, "results"):
        if "/code/kernel_" in p and p.endswith(".py"):
            kernels.setdefault(p.split("/code/")[0], []).append(p)
    for folder, ks in sorted(kernels.items()):
        m = _PROBLEM.search(folder)
        if not m:
            continue
        problem = f"KernelBench/level{m.group(1)}/{m.group(2)}.py"
        try:
            problem_src = git.show(commit, problem)
        except subprocess.CalledProcessError:
            print(f"  llmkernel: no problem {problem}", file=sys.stderr)
            continue
        pick, model = _llmkernel_pick(git, commit, folder, ks)
        w.add(f"level{m.group(1)}_{m.group(2)}", git.show(commit, pick), problem_src, pick, model)
    return {"llmkernel": w.close()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirror", type=Path, default=Path("/work/.mirror"), help="folder of fetched git directories")
    ap.add_argument("--out", type=Path, default=Path(".sweep"))
    a = ap.parse_args(argv)
    counts = {**collect_dlblas(a.mirror, a.out, KernelBench(a.mirror)), **collect_llmkernel(a.mirror, a.out)}
    for source, n in counts.items():
        print(f"{source}: {n} answers")
    return 0


if __name__ == "__main__":
    sys.exit(main())

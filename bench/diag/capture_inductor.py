"""Record what torch.compile generates for problems on this GPU (agent.harness.worker.capture), as JSON fixtures for the
translator's tests: one static capture per size set of the problem (its GPU sizes and its CPU sizes, so that the
translated answer can be judged on the CPU too), and with --dynamic one dynamic capture at the timed size.

    python bench/diag/capture_inductor.py OUT_DIR [--dynamic] [PROBLEM ...]

PROBLEM: built-in names or paths; default: every built-in problem and every file in agent/data/kernelbench/."""

from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from agent.harness.worker.inputs import build  # noqa: E402
from agent.harness.worker.capture import capture  # noqa: E402
from agent.problems import list_problems, load_module, load_problem  # noqa: E402


def main(out: Path, names: list[str], dynamic: bool) -> None:
    import torch

    out.mkdir(parents=True, exist_ok=True)
    if not names:
        names = [p.name for p in list_problems()] + sorted(str(p) for p in (REPO / "agent/data/kernelbench").glob("*.py"))
    for name in names:
        problem = load_problem(name)
        t0 = time.time()
        runs = [(size, False) for size in [*problem.sizes, *problem.cpu_sizes]]
        runs += [(problem.sizes[0], True)] if dynamic else []
        for size, dyn in runs:
            label = f"{size.label}{'_dynamic' if dyn else ''}"
            try:
                module = load_module(problem.path, size.overrides)
                model = build(module, module.Model, 0, "cuda")
                inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
                cap = capture(model, inputs, dynamic=dyn)
                (out / f"inductor_{problem.name}_{label}.json").write_text(cap.model_dump_json(indent=1))
                print(f"{problem.name} {label}: {len(cap.kernels)} kernels {sorted(cap.kernels)}, "
                      f"{len(cap.inputs)} inputs, {time.time() - t0:.1f} s")
            except Exception:
                print(f"{problem.name} {label}: FAILED\n{traceback.format_exc()[-1500:]}")


if __name__ == "__main__":
    args = sys.argv[2:]
    main(Path(sys.argv[1]), [a for a in args if a != "--dynamic"], "--dynamic" in args)

"""Record what torch.compile generates for problems on this GPU (agent.inductor.capture), as JSON fixtures for the
translator's tests: python bench/diag/capture_inductor.py OUT_DIR [PROBLEM ...] (built-in names or paths; default:
every built-in problem and every file in agent/data/kernelbench/)."""

from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from agent.harness.inputs import build  # noqa: E402
from agent.inductor.capture import capture  # noqa: E402
from agent.problems import list_problems, load_module, load_problem  # noqa: E402


def main(out: Path, names: list[str]) -> None:
    import torch

    out.mkdir(parents=True, exist_ok=True)
    if not names:
        names = [p.name for p in list_problems()] + sorted(str(p) for p in (REPO / "agent/data/kernelbench").glob("*.py"))
    for name in names:
        problem = load_problem(name)
        t0 = time.time()
        try:
            module = load_module(problem.path, problem.sizes[0].overrides)
            model = build(module, module.Model, 0, "cuda")
            inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
            cap = capture(model, inputs)
            (out / f"inductor_{problem.name}.json").write_text(cap.model_dump_json(indent=1))
            print(f"{problem.name}: {len(cap.kernels)} kernels {sorted(cap.kernels)} in {time.time() - t0:.1f} s")
        except Exception:
            print(f"{problem.name}: FAILED\n{traceback.format_exc()[-1500:]}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])

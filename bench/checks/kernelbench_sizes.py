"""Issue 21, item 1 on a GPU: every KernelBench look-alike's reference runs for real on CUDA at each GPU size set that
`load_problem(name, "cuda")` keeps (the check itself only ran them on the meta device), and none is skipped.

Usage (GPU machine, repo root): PYTHONPATH=/opt/site:$PWD python3 bench/checks/kernelbench_sizes.py
Writes $OUT/kb_sizes.json (or ./kb_sizes.json): per problem, the sets kept, the skip notices, and per set whether the
reference ran, its output shape and one forward's time (ms, after a warm-up)."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agent.problems import load_module, load_problem, lookalikes  # noqa: E402


class Notices(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def run_at(path: Path, overrides: dict) -> dict:
    import torch

    try:
        m = load_module(path, overrides)
        with torch.device("cuda"), torch.no_grad():
            model, inputs = m.Model(*m.get_init_inputs()), m.get_inputs()
            model(*inputs)
            torch.cuda.synchronize()
            start = time.perf_counter()
            out = model(*inputs)
            torch.cuda.synchronize()
        ms = (time.perf_counter() - start) * 1e3
        del model, inputs
        torch.cuda.empty_cache()
        return {"ok": True, "shape": list(out.shape), "ms": round(ms, 3)}
    except Exception as e:  # a size the check let through but CUDA refuses: the finding this script looks for
        return {"ok": False, "error": f"{type(e).__name__}: {e}"[:300]}


def main() -> int:
    notices = Notices()
    logging.getLogger("agent.problems").addHandler(notices)
    results = {}
    for path in lookalikes():
        before = len(notices.lines)
        problem = load_problem(path.stem, "cuda")
        results[path.stem] = {"kept": [s.label for s in problem.sizes], "notices": notices.lines[before:],
                              "sets": {s.label: {"overrides": s.overrides, **run_at(path, s.overrides)}
                                       for s in problem.sizes}}
        sets = results[path.stem]["sets"]
        print(path.stem, {label: (r["ok"], r.get("shape"), r.get("ms")) for label, r in sets.items()}, flush=True)
    out = Path(os.environ.get("OUT", ".")) / "kb_sizes.json"
    out.write_text(json.dumps(results, indent=1))
    bad = [(n, label) for n, r in results.items() for label, s in r["sets"].items() if not s["ok"]]
    skipped = [n for n, r in results.items() if r["notices"]]
    print(f"wrote {out}; failed: {bad or 'none'}; with skipped sizes: {skipped or 'none'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

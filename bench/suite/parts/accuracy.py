"""Part 4: harness accuracy against ncu, and its two helper modes (accuracy-timing, ncu-target)."""

from __future__ import annotations

import copy
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import bench_summary as S  # noqa: E402  (pure helpers, stdlib only)

from parts.common import (
    BENCH,
    NCU_METRICS,
    NVTX_RANGE,
    REPO,
    _problem,
    _sizes,
    child_env,
    left,
    run_until,
    tail,
)

# ---------------------------------------------------------------- part 4: harness accuracy


def _items(ctx: dict) -> list[dict[str, Any]]:
    """eager, compile, the seed and the memory-fusion best (when it is not the seed), with code files."""
    from agent.problems import starting_code

    work = Path(ctx["work"])
    seed_path = work / "seed.py"
    seed_path.write_text(starting_code(_problem()) or "")
    items: list[dict[str, Any]] = [{"name": "eager"}, {"name": "compile"}, {"name": "seed", "code": str(seed_path)}]
    mf = ctx.get("results", {}).get("mf_run", {})
    best = mf.get("best_code_path")
    fastest = (mf.get("fastest_proposal") or {}).get("code_path")
    if best and Path(best).exists() and (mf.get("best_summary") or {}).get("iteration", 0) != 0:
        items.append({"name": "best_mf", "code": best, "id": mf["best_summary"]["id"],
                      "source": f"the run's best, {mf['best_summary']['id']}"})
    elif fastest and Path(fastest).exists():  # the run kept the seed: measure its fastest proposal instead
        items.append({"name": "best_mf", "code": fastest, "id": mf["fastest_proposal"]["id"],
                      "source": f"fastest correct proposal {mf['fastest_proposal']['id']} (the run's best is the seed)"})
    return items


def _load_code(path: str, tag: str):
    spec = importlib.util.spec_from_file_location(f"bench_candidate_{tag}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # type: ignore[union-attr]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def build_items(spec: dict) -> tuple[dict[str, Callable[[], Any]], dict[str, Callable[[], Any]], dict[str, str]]:
    """(forward fns, GAP-only fns, errors) for the spec's items, built as the harness's worker builds them:
    the problem at its timed size, weights from seed 0, the same inputs."""
    import torch

    from agent.harness.worker.inputs import build, copy_matching_weights, make_inputs, weights
    from agent.harness.job import trial_seed
    from agent.problems import load_module

    device = spec["device"]
    problem = _problem()
    module = load_module(problem.path, _sizes(problem, device)[0].overrides)
    ref = build(module, module.Model, 0, device).eval()
    inputs = make_inputs(module, "problem", trial_seed(0, 0, 0), device)
    fns: dict[str, Callable[[], Any]] = {}
    gaps: dict[str, Callable[[], Any]] = {}
    errors: dict[str, str] = {}
    y = None
    for item in spec["items"]:
        name = item["name"]
        try:
            if name == "eager":
                fns[name] = lambda m=ref: m(*inputs)
            elif name == "compile":
                if device != "cuda":
                    errors[name] = "torch.compile is not timed in CPU mode"
                    continue
                compiled = torch.compile(copy.deepcopy(ref))
                fns[name] = lambda m=compiled: m(*inputs)
            else:
                mod = _load_code(item["code"], name)
                model = build(module, mod.ModelNew, 0, device).eval()
                copy_matching_weights(weights(module, 0, device), model)
                fns[name] = lambda m=model: m(*inputs)
                gap = getattr(mod, "gap", None) or getattr(mod, "fused_multiply_gap", None)
                if gap is not None and hasattr(ref, "conv_transpose"):
                    if y is None:
                        with torch.no_grad():
                            y = ref.conv_transpose(inputs[0])
                    gaps[name] = lambda g=gap, yy=y: g(yy, ref.multiplier)
        except Exception as e:  # noqa: BLE001 - one broken item must not lose the others
            errors[name] = f"{type(e).__name__}: {e}"[:400]
    return fns, gaps, errors


def _warm(fns: dict[str, Callable[[], Any]], errors: dict[str, str], device: str, calls: int = 3) -> None:
    import torch

    for name in list(fns):
        try:
            with torch.no_grad():
                for _ in range(calls):
                    fns[name]()
            if device == "cuda":
                torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001
            errors[name] = f"{type(e).__name__}: {e}"[:400]
            del fns[name]


def mode_accuracy_timing(spec_path: Path, out_path: Path) -> int:
    """The harness's own timing function (agent.harness.worker.timing) on each item, `repeats` times round-robin, then a
    plain loop: n calls back to back, one synchronize, no flush."""
    import torch

    from agent.harness.settings import settings
    from agent.harness.worker.timing import Bench
    from agent.harness.worker.trusted import Trusted

    spec = json.loads(spec_path.read_text())
    device, repeats = spec["device"], spec.get("repeats", 3)
    cfg = settings().timing
    trusted = Trusted(device)

    def bench(fn: Callable[[], Any], cfg: Any) -> Any:
        b = Bench(fn, [], None, cfg, trusted)  # no input buffers: the same inputs every call, as eager is timed
        return b.gpu() if device == "cuda" else b.cpu()
    t0 = time.monotonic()
    fns, gaps, errors = build_items(spec)
    _warm(fns, errors, device)
    _warm(gaps, errors, device)
    res: dict[str, Any] = {"items": {n: {"medians_ms": [], "spreads_pct": [], "walls_ms": [], "notes": [],
                                         "gap_medians_us": [], "gap_spreads_pct": []} for n in fns},
                           "errors": errors, "build_s": time.monotonic() - t0, "timing_cfg": cfg.model_dump()}

    def write() -> None:
        out_path.write_text(json.dumps(res, indent=1))

    write()
    with torch.no_grad():
        for r in range(repeats):
            for name, fn in fns.items():
                st = bench(fn, cfg)
                d = res["items"][name]
                d["medians_ms"].append(st.median_ms)
                d["spreads_pct"].append(st.spread_pct)
                d["walls_ms"].append(st.wall_ms)
                if st.note:
                    d["notes"].append(st.note)
                if name in gaps:
                    g = bench(gaps[name], cfg)
                    d["gap_medians_us"].append(g.median_ms * 1e3)
                    d["gap_spreads_pct"].append(g.spread_pct)
            write()
        for name, fn in fns.items():
            est = statistics.median(res["items"][name]["medians_ms"])
            n = 2 if device != "cuda" else int(min(200, max(20, 300.0 / max(est, 1e-3))))
            if device == "cuda":
                torch.cuda.synchronize()
            s = time.perf_counter()
            for _ in range(n):
                fn()
            if device == "cuda":
                torch.cuda.synchronize()
            res["items"][name]["plain_loop_ms"] = (time.perf_counter() - s) * 1e3 / n
            res["items"][name]["plain_loop_calls"] = n
    res["wall_s"] = time.monotonic() - t0
    write()
    return 0


def mode_ncu_target(spec_path: Path) -> int:
    """Warm every item up (compilation outside the range), then one forward of each, each preceded by the
    marker kernel, inside the NVTX range: ncu --nvtx-include bench_items/ profiles exactly these."""
    import torch
    from _marker import mark

    spec = json.loads(spec_path.read_text())
    device = spec["device"]
    fns, _, errors = build_items(spec)
    _warm(fns, errors, device)
    buf = torch.zeros(1, device=device)
    mark(buf)
    names = [n for n in (i["name"] for i in spec["items"]) if n in fns]
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push(NVTX_RANGE)
    with torch.no_grad():
        for name in names:
            mark(buf)
            fns[name]()
            if device == "cuda":
                torch.cuda.synchronize()
    if device == "cuda":
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
    Path(spec["done_path"]).write_text(json.dumps({"profiled": names, "errors": errors}))
    print(f"ncu-target: profiled {names}; errors {errors}", flush=True)
    return 0


def read_launches(report: Path) -> list[tuple[str, dict[str, Any]]]:
    """Every launch of a report, in launch order (agent.ncu.read_launches: ncu_report, else ncu's raw CSV)."""
    from agent.ncu import read_launches as read

    return read(report, list(NCU_METRICS))


def part_accuracy(ctx: dict, deadline: float, save: Callable[[dict], None]) -> dict:
    from agent.harness.static.policy import kernel_names
    from agent.profiler import find_ncu

    work = Path(ctx["work"])
    items = _items(ctx)
    device = ctx["device"]
    spec = {"device": device, "items": items, "repeats": ctx["params"]["accuracy_repeats"],
            "done_path": str(work / "ncu_target_done.json")}
    spec_path = work / "accuracy_spec.json"
    spec_path.write_text(json.dumps(spec))
    data: dict[str, Any] = {"items": [i["name"] for i in items], "sources": {i["name"]: i.get("source") for i in items},
                            "ids": {i["name"]: i.get("id") for i in items if i.get("id")},
                            "ncu": {}}
    save(data)

    # 1. the harness's timing function, repeated (this also fills the inductor cache the ncu runs then reuse);
    #    on the GPU it may use a little over half the part's time, the two ncu runs share the rest
    out_json = work / "accuracy_timing.json"
    cmd = [sys.executable, str(BENCH / "bench_parts.py"), "accuracy-timing", str(spec_path), str(out_json)]
    rc, cut, wall = run_until(cmd, deadline=deadline - (0.45 * left(deadline) if device == "cuda" else 5), cwd=REPO,
                              env=child_env(), stdout=work / "accuracy_timing.out", stderr=work / "accuracy_timing.err")
    data["timing"] = json.loads(out_json.read_text()) if out_json.exists() else {}
    data["timing"].update(returncode=rc, cut_by_deadline=cut, wall_s=wall)
    if rc != 0:
        data["timing"]["stderr_tail"] = tail(work / "accuracy_timing.err", 1500)
    save(data)

    # 2. ncu over the same forwards, every kernel in the range, at clocks none and base
    own = {i["name"]: kernel_names(Path(i["code"]).read_text()) for i in items if i.get("code")}
    ncu = find_ncu()
    clocks = ["none", "base"]
    for clock in clocks:
        if device != "cuda" or ncu is None:
            # no ncu: run the profiled script bare once, so its plumbing is still exercised
            if clock == "none":
                cmd = [sys.executable, str(BENCH / "bench_parts.py"), "ncu-target", str(spec_path)]
                rc, cut, wall = run_until(cmd, deadline=deadline - 2, cwd=REPO, env=child_env(),
                                          stdout=work / "ncu_target.out", stderr=work / "ncu_target.err")
                data["ncu"]["skipped"] = f"no ncu ({'CPU mode' if device != 'cuda' else 'not found'})"
                data["ncu"]["bare_target"] = {"returncode": rc, "wall_s": wall, "stderr_tail": tail(work / "ncu_target.err", 800)}
            continue
        if left(deadline) < 20:
            data["ncu"][clock] = {"skipped": f"only {left(deadline):.0f} s left"}
            continue
        stem = work / f"accuracy_{clock}"
        # application-only: torch.compile's worker processes (if any start) stay uninstrumented; every kernel of
        # interest launches in the profiled process itself
        cmd = [str(ncu), "--target-processes", "application-only", "--nvtx", "--nvtx-include", f"{NVTX_RANGE}/",
               "--clock-control", clock, "--metrics", ",".join(NCU_METRICS), "-f", "-o", str(stem),
               sys.executable, str(BENCH / "bench_parts.py"), "ncu-target", str(spec_path)]
        Path(spec["done_path"]).unlink(missing_ok=True)
        stop = time.monotonic() + (left(deadline) - 3) / 2 if clock == "none" else deadline - 3
        rc, cut, wall = run_until(cmd, deadline=stop, cwd=REPO, env=child_env(),
                                  stdout=work / f"ncu_{clock}.out", stderr=work / f"ncu_{clock}.err")
        entry: dict[str, Any] = {"returncode": rc, "cut_by_deadline": cut, "wall_s": wall,
                                 "command": " ".join(["ncu", *cmd[1:-4], "python3 bench/suite/bench_parts.py ncu-target SPEC"])}
        report = stem.with_name(stem.name + ".ncu-rep")
        try:
            done = json.loads(Path(spec["done_path"]).read_text())
            launches = read_launches(report)
            split = S.split_by_markers(launches, done["profiled"])
            entry["items"] = {name: S.summarize_launches(ls, own.get(name, [])) for name, ls in split.items()}
            entry["target_errors"] = done.get("errors")
        except Exception as e:  # noqa: BLE001
            entry["error"] = f"{type(e).__name__}: {e}"[:500]
            entry["stdout_tail"] = tail(work / f"ncu_{clock}.out", 1500)
            entry["stderr_tail"] = tail(work / f"ncu_{clock}.err", 1500)
        data["ncu"][clock] = entry
        save(data)
    return data



"""The markdown tables of BENCHMARKS.md's sections 1-6 (and the headline), rendered from bench/suite/run_all.py's
combined JSON. Pure: no GPU, no clock, no files (tests/test_bench.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from bench_summary import (TARGET_AGREEMENT_PCT, TARGET_DRAM_PCT, TARGET_ITERATION_S, TARGET_READ_ONCE_X,
                           TARGET_SPREAD_PCT, agreement_pct, median, met, repeat_spread_pct)


def fmt(v: Any, spec: str = ".3f", unit: str = "") -> str:
    """A table cell: '—' for missing values, numbers formatted with `spec` and a unit."""
    if v is None or v == "":
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)):
        return f"{v:{spec}}{unit}"
    return str(v).replace("|", "\\|").replace("\n", " ")


def md_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub-flavoured markdown pipe table (cells already formatted strings; None -> '—')."""
    head = "| " + " | ".join(headers) + " |"
    sep = "|" + "|".join("---" for _ in headers) + "|"
    body = ["| " + " | ".join("—" if c is None else str(c).replace("\n", " ") for c in r) + " |" for r in rows]
    return "\n".join([head, sep, *body])


def _data(combined: dict[str, Any], part: str) -> dict[str, Any]:
    p = combined.get("parts", {}).get(part) or {}
    return p.get("data") or {}


def _status_line(combined: dict[str, Any], part: str) -> str:
    p = combined.get("parts", {}).get(part)
    if not p:
        return f"_{part}: not run._"
    s = f"_{part}: {p.get('status', '?')} in {fmt(p.get('wall_s'), '.0f', ' s')}"
    if p.get("error"):
        s += f" — {fmt(str(p['error']).strip().splitlines()[-1][:300])}"
    return s + "_"


def _harness_values(combined: dict[str, Any], item: str) -> list[float]:
    """Every timing the agent's own (sandboxed) harness took of an item during the runs: eager and compile are
    timed again each round, the seed once per run (iteration 0)."""
    vals: list[float] = []
    for part in ("mf_run", "e2e_run", "baselines"):
        d = _data(combined, part)
        if item in ("eager", "compile"):
            key = "eager_ms" if item == "eager" else "compile_ms"
            seen = set()
            for c in d.get("candidates", []):
                v = c.get(key)
                tag = (c.get("iteration"), v)
                if v is not None and tag not in seen:  # one value per round (all candidates of a round share it)
                    seen.add(tag)
                    vals.append(v)
        elif item == "seed":
            vals += [c["ms"] for c in d.get("candidates", []) if c.get("iteration") == 0 and c.get("ms") is not None]
        elif item == "best_mf" and part == "mf_run":
            want = (_data(combined, "accuracy").get("ids") or {}).get("best_mf") or (d.get("best_summary") or {}).get("id")
            vals += [c["ms"] for c in d.get("candidates", []) if c.get("id") == want and c.get("ms") is not None]
    return vals


def accuracy_figures(combined: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Per item: the harness timing's median, its agreement with ncu (clocks none / base) and repeat spread."""
    acc = _data(combined, "accuracy")
    timing = (acc.get("timing") or {}).get("items") or {}
    ncu = acc.get("ncu") or {}
    out: dict[str, dict[str, float | None]] = {}
    for item, t in timing.items():
        h = median(t.get("medians_ms") or [])
        out[item] = {
            "harness_ms": h, "repeat_spread_pct": repeat_spread_pct(t.get("medians_ms") or []),
            "vs_ncu_none_pct": agreement_pct(h, (((ncu.get("none") or {}).get("items") or {}).get(item) or {}).get("sum_ms")),
            "vs_ncu_base_pct": agreement_pct(h, (((ncu.get("base") or {}).get("items") or {}).get(item) or {}).get("sum_ms")),
            "vs_plain_pct": agreement_pct(h, t.get("plain_loop_ms")),
        }
    return out


def _worst(values: Iterable[float | None]) -> tuple[float | None, float | None]:
    """(the value of largest magnitude, that magnitude)"""
    xs = [v for v in values if v is not None]
    if not xs:
        return None, None
    w = max(xs, key=abs)
    return w, abs(w)


def headline(combined: dict[str, Any]) -> list[str]:
    """The targets of issue 10 against this run's figures: the table README.md links to."""
    lim, mf, e2e = _data(combined, "limits"), _data(combined, "mf_run"), _data(combined, "e2e_run")
    best = mf.get("best_summary") or {}
    bp = best.get("profile") or {}
    read_once = lim.get("read_conv_out_once_us_at_copy_bw")
    ratio = bp["gap_us"] / read_once if bp.get("gap_us") and read_once else None
    figs = accuracy_figures(combined)
    w_none, a_none = _worst(f["vs_ncu_none_pct"] for f in figs.values())
    w_base, a_base = _worst(f["vs_ncu_base_pct"] for f in figs.values())
    _, spread = _worst(f["repeat_spread_pct"] for f in figs.values())
    k_it = next((it for it in mf.get("iterations", []) if it.get("iteration") == 1), None) or {}
    eb = e2e.get("best_summary") or {}
    rows = [
        ["memory-fusion best: GAP kernel DRAM throughput (ncu)", f"≥ {TARGET_DRAM_PCT:.0f} %",
         fmt(bp.get("gap_dram_pct"), ".1f", " %"), met(bp.get("gap_dram_pct"), TARGET_DRAM_PCT, at_most=False, points=True)],
        ["memory-fusion best: GAP kernel / read-once limit", f"≤ {TARGET_READ_ONCE_X}×", fmt(ratio, ".2f", "×"),
         met(ratio, TARGET_READ_ONCE_X)],
        ["harness vs ncu Σ kernels, clocks none (worst item)", f"within ±{TARGET_AGREEMENT_PCT:.0f} %",
         fmt(w_none, "+.1f", " %"), met(a_none, TARGET_AGREEMENT_PCT, points=True)],
        ["harness vs ncu Σ kernels, clocks base (worst item)", f"within ±{TARGET_AGREEMENT_PCT:.0f} %",
         fmt(w_base, "+.1f", " %"), met(a_base, TARGET_AGREEMENT_PCT, points=True)],
        ["harness repeat spread (worst item)", f"< {TARGET_SPREAD_PCT:.0f} %", fmt(spread, ".1f", " %"),
         met(spread, TARGET_SPREAD_PCT, points=True)],
        [f"one iteration of K={fmt(k_it.get('candidates'), 'd')} with stage-set profiling", f"< {TARGET_ITERATION_S:.0f} s",
         fmt(k_it.get("wall_s"), ".1f", " s"), met(k_it.get("wall_s"), TARGET_ITERATION_S)],
        ["memory-fusion best vs eager / torch.compile", "—",
         f"{fmt(best.get('speedup_vs_eager'), '.2f', '×')} / {fmt(best.get('speedup_vs_compile'), '.2f', '×')}", ""],
        [f"end to end (--stage auto) best vs eager / torch.compile ({fmt(eb.get('stage'))})", "no target",
         f"{fmt(eb.get('speedup_vs_eager'), '.2f', '×')} / {fmt(eb.get('speedup_vs_compile'), '.2f', '×')}", ""],
    ]
    return ["## Headline", "", md_table(["target", "goal", "this run", "met?"], rows), ""]


def _machine(combined: dict[str, Any]) -> list[str]:
    """Where and how the run was made: the line above the headline."""
    meta, env = combined.get("meta", {}), combined.get("env", {})
    return [f"Machine: {fmt(env.get('gpu'))} (driver {fmt(env.get('driver'))}, CUDA {fmt(env.get('cuda'))}); "
           f"torch {fmt(env.get('torch'))}, triton {fmt(env.get('triton'))}, {fmt(env.get('ncu'))}, "
           f"Python {fmt(env.get('python'))}. Date: {fmt(meta.get('started'))}. Commit: {fmt(meta.get('commit'))}. "
           f"Command: `{fmt(meta.get('command'))}`" + (" — CPU SMOKE RUN: timings mean nothing." if meta.get("cpu_smoke") else ""),
           ""]


def _limits(combined: dict[str, Any]) -> list[str]:
    """Section 1: copy and read bandwidth, the read-once times they imply."""
    lim = _data(combined, "limits")
    read_once_us = lim.get("read_conv_out_once_us_at_copy_bw")
    out: list[str] = []
    out += ["## 1. Limits", "", _status_line(combined, "limits"), ""]
    out.append(md_table(["quantity", "value"], [
        ["device-to-device copy bandwidth (1 GiB, read + write)", f"{fmt(lim.get('copy_gbs'), '.1f', ' GB/s')} (spread {fmt(lim.get('copy_spread_pct'), '.1f', ' %')})"],
        ["read bandwidth (torch.sum of 1 GiB)", f"{fmt(lim.get('sum_read_gbs'), '.1f', ' GB/s')} (spread {fmt(lim.get('sum_spread_pct'), '.1f', ' %')})"],
        ["catalog peak DRAM bandwidth", fmt(lim.get("spec_peak_gbs"), ".0f", " GB/s")],
        ["copy bandwidth / catalog peak", fmt(lim.get("copy_pct_of_spec"), ".1f", " %")],
        ["ConvTranspose2d output (fp32)", fmt(lim.get("conv_out_bytes") and lim["conv_out_bytes"] / 1e6, ".1f", " MB")],
        ["read it once at copy bandwidth", fmt(read_once_us, ".1f", " µs")],
        ["read it once at read bandwidth", fmt(lim.get("read_conv_out_once_us_at_read_bw"), ".1f", " µs")],
        ["input (fp32)", fmt(lim.get("conv_in_bytes") and lim["conv_in_bytes"] / 1e6, ".1f", " MB")],
        ["read the input once at copy bandwidth", fmt(lim.get("read_input_once_us_at_copy_bw"), ".1f", " µs")],
    ]))
    out.append("")

    return out


def _seed(combined: dict[str, Any]) -> dict[str, Any]:
    """The seed's figures: the memory-fusion run's iteration 0, else the baselines part's."""
    return _data(combined, "mf_run").get("seed_summary") or _data(combined, "baselines").get("seed_summary") or {}


def _baselines(combined: dict[str, Any]) -> list[str]:
    """Section 2: eager, torch.compile and the seed, by the harness and by ncu."""
    mf = _data(combined, "mf_run")
    acc = _data(combined, "accuracy")
    seed = _seed(combined)
    out: list[str] = []
    ncu_none = (acc.get("ncu") or {}).get("none") or {}
    ncu_base = (acc.get("ncu") or {}).get("base") or {}
    timing = acc.get("timing") or {}
    out += ["## 2. Baselines", "", _status_line(combined, "mf_run" if mf.get("seed_summary") else "baselines"), ""]
    rows2 = []
    for item, label in (("eager", "eager PyTorch"), ("compile", "torch.compile"), ("seed", "seed's starting kernel")):
        if item == "seed":
            ms, spread = seed.get("ms"), seed.get("spread_pct")
        else:
            ms, spread = seed.get(f"{item}_ms"), seed.get(f"{item}_spread_pct")
        eager_ms, comp_ms = seed.get("eager_ms"), seed.get("compile_ms")
        nn_ = (ncu_none.get("items") or {}).get(item) or {}
        nb = (ncu_base.get("items") or {}).get(item) or {}
        gap = (seed.get("profile") or {}) if item == "seed" else {}
        rows2.append([
            label, f"{fmt(ms)} ms (±{fmt(spread, '.1f')} %)",
            fmt(eager_ms / ms if eager_ms and ms else None, ".2f", "×"), fmt(comp_ms / ms if comp_ms and ms else None, ".2f", "×"),
            fmt(nn_.get("sum_ms")), fmt(nn_.get("dram_pct_weighted"), ".1f", " %"), fmt(nn_.get("kernels"), "d"),
            fmt(gap.get("gap_us"), ".1f", " µs") if item == "seed" else fmt(nb.get("own_us"), ".1f"),
            fmt(gap.get("gap_dram_pct"), ".1f", " %") if item == "seed" else "—",
            fmt(gap.get("grid"), "d") if item == "seed" else "—",
        ])
    out.append(md_table(["", "harness time", "speedup vs eager", "vs compile", "ncu Σ kernels (ms, clocks none)",
                         "DRAM % (duration-weighted)", "kernels", "GAP kernel (ncu, base)", "GAP DRAM %", "GAP grid"],
                        rows2))
    out += ["", "Harness times: the agent's harness (sandboxed worker) in iteration 0 of the memory-fusion run; "
            "ncu: every kernel of one forward inside the NVTX range (section 4); GAP kernel: the profiler's stage "
            "set (`--clock-control base`).", ""]
    return out


def _best_memory_fusion(combined: dict[str, Any]) -> list[str]:
    """Section 3: the memory-fusion run's best against the targets."""
    mf = _data(combined, "mf_run")
    seed = _seed(combined)
    read_once_us = _data(combined, "limits").get("read_conv_out_once_us_at_copy_bw")
    out: list[str] = []
    best = mf.get("best_summary") or {}
    bp = best.get("profile") or {}
    gap_us, gap_dram = bp.get("gap_us"), bp.get("gap_dram_pct")
    ratio = gap_us / read_once_us if gap_us and read_once_us else None
    seed_gap = (seed.get("profile") or {}).get("gap_us")
    out += ["## 3. The agent's best for memory-fusion (offline proposer)", "", _status_line(combined, "mf_run"), "",
            f"Command: `{fmt(' '.join(mf.get('command', [])))}`", ""]
    out.append(md_table(["figure", "value", "target", "met?"], [
        ["best candidate", fmt(best.get("id")), "", ""],
        ["what it is (the proposer's first line)", fmt((best.get("why") or "")[:160]), "", ""],
        ["whole model time", f"{fmt(best.get('ms'))} ms (±{fmt(best.get('spread_pct'), '.1f')} %)", "", ""],
        ["speedup vs eager", fmt(best.get("speedup_vs_eager"), ".2f", "×"), "", ""],
        ["speedup vs torch.compile", fmt(best.get("speedup_vs_compile"), ".2f", "×"), "", ""],
        ["GAP kernel(s)", fmt(", ".join(bp.get("kernels", [])) or None), "", ""],
        ["GAP kernel time (ncu, base clocks)", fmt(gap_us, ".1f", " µs"), "", ""],
        ["GAP kernel DRAM throughput (ncu)", fmt(gap_dram, ".1f", " %"), f"≥ {TARGET_DRAM_PCT:.0f} %",
         met(gap_dram, TARGET_DRAM_PCT, at_most=False, points=True)],
        ["read-once limit (section 1)", fmt(read_once_us, ".1f", " µs"), "", ""],
        ["GAP kernel / read-once limit", fmt(ratio, ".2f", "×"), f"≤ {TARGET_READ_ONCE_X}×", met(ratio, TARGET_READ_ONCE_X)],
        ["GAP kernel speedup vs the seed's", fmt(seed_gap / gap_us if seed_gap and gap_us else None, ".2f", "×"), "", ""],
        ["bottleneck (ncu classify)", fmt(bp.get("bottleneck")), "", ""],
        ["iterations / candidates / correct", f"{fmt(mf.get('iterations_done'), 'd')} / {fmt(len(mf.get('candidates', [])) or None, 'd')} / "
         f"{fmt(sum(1 for c in mf.get('candidates', []) if c.get('verdict') == 'correct') or None, 'd')}", "", ""],
        ["stopped", fmt(mf.get("stop_reason")), "", ""],
    ]))
    out.append("")

    return out


def _accuracy(combined: dict[str, Any]) -> list[str]:
    """Section 4: the harness's timing against ncu and a plain loop, whole forwards and the GAP kernel alone."""
    acc = _data(combined, "accuracy")
    ncu_none = (acc.get("ncu") or {}).get("none") or {}
    ncu_base = (acc.get("ncu") or {}).get("base") or {}
    timing = acc.get("timing") or {}
    out: list[str] = []
    out += ["## 4. Harness accuracy", "", _status_line(combined, "accuracy"), ""]
    rows4 = []
    for item, label in (("eager", "eager"), ("compile", "torch.compile"), ("seed", "seed kernel"), ("best_mf", "best (memory-fusion)")):
        t = (timing.get("items") or {}).get(item) or {}
        meds = t.get("medians_ms") or []
        h = median(meds)
        agent_vals = _harness_values(combined, item)
        nn_ = (ncu_none.get("items") or {}).get(item) or {}
        nb = (ncu_base.get("items") or {}).get(item) or {}
        rows4.append([
            label,
            f"{fmt(median(agent_vals))} (n={len(agent_vals)}, {fmt(repeat_spread_pct(agent_vals), '.1f', ' %')})" if agent_vals else "—",
            fmt(h), fmt(repeat_spread_pct(meds), ".1f", " %"), fmt(median(t.get("spreads_pct") or []), ".1f", " %"),
            fmt(median(t.get("walls_ms") or [])), fmt(t.get("plain_loop_ms")),
            fmt(nn_.get("sum_ms")), fmt(nb.get("sum_ms")),
            fmt(agreement_pct(h, nn_.get("sum_ms")), "+.1f", " %"), fmt(agreement_pct(h, nb.get("sum_ms")), "+.1f", " %"),
            fmt(agreement_pct(h, t.get("plain_loop_ms")), "+.1f", " %"),
        ])
    out.append(md_table(["", "harness in the agent runs: median ms (n, repeat spread)", "harness timing ×3: median ms",
                         "repeat spread", "spread within a repeat (p80−p20)", "synchronized wall ms",
                         "plain loop ms", "ncu Σ ms (clocks none)", "ncu Σ ms (clocks base)",
                         "harness vs ncu none", "harness vs ncu base", "harness vs plain loop"], rows4))
    src = (acc.get("sources") or {}).get("best_mf")
    if src:
        out += ["", f"best (memory-fusion) here is {src}."]
    out += ["", f"Targets: agreement with ncu within ±{TARGET_AGREEMENT_PCT:.0f} % (like for like: the harness times "
            "the whole forward, ncu sums every kernel in the same NVTX range, conv included); repeat spread "
            f"< {TARGET_SPREAD_PCT:.0f} %.", ""]
    rows4b = []
    for item in ("seed", "best_mf"):
        t = (timing.get("items") or {}).get(item) or {}
        nn_ = (ncu_none.get("items") or {}).get(item) or {}
        nb = (ncu_base.get("items") or {}).get(item) or {}
        ev = median(t.get("gap_medians_us") or [])
        rows4b.append([item, fmt(ev, ".1f"), fmt(repeat_spread_pct(t.get("gap_medians_us") or []), ".1f", " %"),
                       fmt(nn_.get("own_us"), ".1f"), fmt(nb.get("own_us"), ".1f"),
                       fmt(nn_.get("own_dram_pct"), ".1f", " %"), fmt(nb.get("own_dram_pct"), ".1f", " %"),
                       fmt(agreement_pct(ev, nn_.get("own_us")), "+.1f", " %"), fmt(agreement_pct(ev, nb.get("own_us")), "+.1f", " %")])
    out.append(md_table(["GAP kernel alone", "events µs (harness timing fn)", "repeat spread", "ncu µs (none)",
                         "ncu µs (base)", "DRAM % (none)", "DRAM % (base)", "events vs ncu none", "events vs ncu base"],
                        rows4b))
    out.append("")
    kernel_rows_md = []
    for item in ("eager", "compile", "seed", "best_mf"):
        kn = {r["name"]: r for r in ((ncu_none.get("items") or {}).get(item) or {}).get("launches", [])}
        for r in ((ncu_base.get("items") or {}).get(item) or {}).get("launches", []) or list(kn.values()):
            rn = kn.get(r["name"], {})
            kernel_rows_md.append([item, fmt(r["name"][:70]), fmt(rn.get("us"), ".1f"), fmt(r.get("us"), ".1f"),
                                   fmt(rn.get("dram_pct"), ".1f", " %"), fmt(r.get("grid"), ".0f")])
    if kernel_rows_md:
        out += ["Kernels of one forward (ncu):", "", md_table(["item", "kernel", "µs (none)", "µs (base)", "DRAM % (none)",
                                                                "grid"], kernel_rows_md), ""]

    return out


def _end_to_end(combined: dict[str, Any]) -> list[str]:
    """Section 5: the --stage auto run."""
    e2e = _data(combined, "e2e_run")
    out: list[str] = []
    eb = e2e.get("best_summary") or {}
    out += ["## 5. End to end (`--stage auto`)", "", _status_line(combined, "e2e_run"), "",
            f"Command: `{fmt(' '.join(e2e.get('command', [])))}`", ""]
    stages = " → ".join(f"{it.get('iteration')}:{it.get('stage')}" for it in e2e.get("iterations", []))
    out.append(md_table(["figure", "value"], [
        ["iterations (stage)", fmt(stages or None)],
        ["best candidate (stage)", f"{fmt(eb.get('id'))} ({fmt(eb.get('stage'))})"],
        ["what it is", fmt((eb.get("why") or "")[:160])],
        ["time", f"{fmt(eb.get('ms'))} ms (±{fmt(eb.get('spread_pct'), '.1f')} %)"],
        ["speedup vs eager", fmt(eb.get("speedup_vs_eager"), ".2f", "×")],
        ["speedup vs torch.compile", fmt(eb.get("speedup_vs_compile"), ".2f", "×")],
        ["its longest kernel's DRAM %", fmt((eb.get("profile") or {}).get("gap_dram_pct"), ".1f", " %")],
        ["candidates / correct", f"{fmt(len(e2e.get('candidates', [])) or None, 'd')} / "
         f"{fmt(sum(1 for c in e2e.get('candidates', []) if c.get('verdict') == 'correct') or None, 'd')}"],
        ["what stopped it", fmt(e2e.get("stop_reason"))],
    ]))
    out.append("")

    return out


def _throughput(combined: dict[str, Any]) -> list[str]:
    """Section 6: where a candidate's and an iteration's time goes; parts that did not finish."""
    mf = _data(combined, "mf_run")
    thr = _data(combined, "throughput")
    e2e = _data(combined, "e2e_run")
    out: list[str] = []
    out += ["## 6. Agent throughput", "", _status_line(combined, "throughput"), ""]
    k_it = next((it for it in mf.get("iterations", []) if it.get("iteration") == 1), None) or {}
    ph = thr.get("phases") or {}
    rows6 = [
        ["extraction + static checks (in process)", fmt(ph.get("static_ms") and ph["static_ms"] / 1e3, ".4f"),
         f"median over {fmt(ph.get('static_n'), 'd')} answers"],
        ["worker start-up + build + 4 calls, Triton cache warm", fmt(ph.get("worker_warm_s"), ".1f"), "sandboxed profile-mode worker"],
        ["JIT compile (first call)", fmt(ph.get("compile_s"), ".1f"), "cold − warm Triton cache"],
        ["validation (2 sizes × 3 inputs)", fmt(ph.get("validation_s"), ".1f"), "evaluate worker without timing − warm start-up"],
        ["timing", fmt(ph.get("timing_s"), ".1f"), "evaluate worker with − without timing"],
        ["whole candidate in the agent (median)", fmt(mf.get("candidate_s_median"), ".1f"),
         "EvalResult.duration_s of the run's proposals (worker + comparison)"],
        ["reference + baselines per round", fmt(k_it.get("shared_s"), ".1f"), "evaluate phase − Σ candidate durations"],
        ["ncu, stage set", fmt(ph.get("ncu_stage_s"), ".1f"), f"adds {fmt(ph.get('ncu_stage_added_s'), '+.1f', ' s')} over a cold plain run"],
        ["ncu, full set", fmt(ph.get("ncu_full_s"), ".1f"), f"adds {fmt(ph.get('ncu_full_added_s'), '+.1f', ' s')} over a cold plain run"],
        [f"whole iteration, K={fmt(k_it.get('candidates'), 'd')} (propose + evaluate + profile best)", fmt(k_it.get("wall_s"), ".1f"),
         f"target < {TARGET_ITERATION_S:.0f} s: {met(k_it.get('wall_s'), TARGET_ITERATION_S)}"],
        ["candidates per GPU-minute", fmt(k_it.get("candidates") * 60 / k_it["wall_s"] if k_it.get("wall_s") and k_it.get("candidates") else None, ".1f"), ""],
    ]
    out.append(md_table(["step", "seconds per candidate", "how measured"], rows6))
    its = mf.get("iterations", []) + e2e.get("iterations", [])
    if its:
        out += ["", "Iterations as the runs' event streams show them:", "", md_table(
            ["run", "iteration", "stage", "K", "propose s", "evaluate s", "Σ candidates s", "ref+baselines s",
             "profile s", "wall s"],
            [[fmt(run), fmt(it.get("iteration"), "d"), fmt(it.get("stage")), fmt(it.get("candidates"), "d"),
              fmt(it.get("propose_s"), ".1f"), fmt(it.get("evaluate_s"), ".1f"), fmt(it.get("sum_candidate_s"), ".1f"),
              fmt(it.get("shared_s"), ".1f"), fmt(it.get("profile_s"), ".1f"), fmt(it.get("wall_s"), ".1f")]
             for run, d in (("memory-fusion", mf), ("auto", e2e)) for it in d.get("iterations", [])])]
    out.append("")
    failed = [f"{name}: {p.get('status')}" for name, p in combined.get("parts", {}).items()
              if p.get("status") not in ("ok", "not needed")]
    if failed:
        out += ["Parts that did not finish cleanly: " + "; ".join(failed) + ".", ""]
    return out


def render_tables(combined: dict[str, Any]) -> str:
    """BENCHMARKS.md's sections 1-6 as markdown, from bench/suite/run_all.py's combined JSON."""
    out = _machine(combined) + headline(combined)
    for section in (_limits, _baselines, _best_memory_fusion, _accuracy, _end_to_end, _throughput):
        out += section(combined)
    return "\n".join(out)

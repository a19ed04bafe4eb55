"""The public-answer sweep's tables (bench/suite/sweep_public.py): pure functions of its results, markdown out."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from sweep_review import answers_table, review_table

# verdicts in the order a reader wants them: what ran, then what was refused or could not be judged
ORDER = ["correct", "incorrect", "runtime_error", "compile_error", "timeout", "rule_violation", "syntax_error",
         "no_code", "sweep-timeout", "cli-error", "passes-static"]


def _by_source(results: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in sorted(results, key=lambda r: (r["source"], r["answer"])):
        out.setdefault(r["source"], []).append(r)
    return out


def verdict_table(results: list[dict]) -> str:
    by = _by_source(results)
    seen = [v for v in ORDER if any(r["verdict"] == v for r in results)]
    seen += sorted({r["verdict"] for r in results} - set(seen))
    rows = ["| source | answers | " + " | ".join(seen) + " |", "|---|---:|" + "---:|" * len(seen)]
    for source, rs in [*by.items(), ("all", sorted(results, key=lambda r: r["answer"]))]:
        c = Counter(r["verdict"] for r in rs)
        rows.append(f"| {source} | {len(rs)} | " + " | ".join(str(c.get(v, 0)) for v in seen) + " |")
    return "\n".join(rows)


def _rules(r: dict, kind: str) -> set[str]:
    return {v["rule"] for v in r.get("violations", []) if v["kind"] == kind}


def refusal_table(results: list[dict], kind: str = "static") -> str:
    """Answers refused per rule and source (an answer breaking two rules counts under each)."""
    by = _by_source(results)
    rules = sorted({rule for r in results for rule in _rules(r, kind)})
    if not rules:
        return f"(no {kind} refusals)"
    rows = ["| rule | " + " | ".join(by) + " | all |", "|---|" + "---:|" * (len(by) + 1)]
    for rule in rules:
        counts = [sum(rule in _rules(r, kind) for r in rs) for rs in by.values()]
        rows.append(f"| {rule} | " + " | ".join(map(str, counts)) + f" | {sum(counts)} |")
    refused = [sum(bool(_rules(r, kind)) for r in rs) for rs in by.values()]
    rows.append("| answers refused | " + " | ".join(f"{n} of {len(rs)}" for n, rs in zip(refused, by.values()))
                + f" | {sum(refused)} of {len(results)} |")
    return "\n".join(rows)


def sizes_table(results: list[dict]) -> str:
    """Per source, the problems CPU mode reduces, those it judges at their own (full) sizes, those that do not load."""
    by = _by_source(results)
    kinds = ["reduced", "own sizes", "load error"]
    rows = ["| source | problem reduced | own sizes | load error | answer asserts or branches on the device |",
            "|---|" + "---:|" * (len(kinds) + 1)]
    for source, rs in by.items():
        c = Counter(r["cpu_sizes"].split(":")[0] for r in rs if "cpu_sizes" in r)
        rows.append(f"| {source} | " + " | ".join(str(c.get(k, 0)) for k in kinds)
                    + f" | {sum(bool(r.get('device_branch')) for r in rs)} |")
    return "\n".join(rows)


def render(results: list[dict], meta: dict, sweep: Path) -> str:
    srcs = meta.get("sources", {})
    head = [f"## Public answers: {len(results)} judged ({meta.get('device')}, stage {meta.get('stage')}, agent "
            f"{meta.get('agent_commit')}, {meta.get('date')})", ""]
    for name, s in srcs.items():
        head.append(f"- {name}: {s.get('repo')}@{str(s.get('commit'))[:10]}, problems {s.get('problems')}")
    parts = ["\n".join(head), "### Verdicts", verdict_table(results), "### Static refusals by rule (answers)",
             refusal_table(results, "static")]
    if any(_rules(r, "static") for r in results):
        parts += ["### Static refusals reviewed by hand (answers)", review_table(results)]
    if any("cpu_sizes" in r for r in results):
        parts += ["### Problems in CPU mode (answers)", sizes_table(results)]
    if any(_rules(r, "run-time") for r in results):
        parts += ["### Run-time refusals by tag (answers)", refusal_table(results, "run-time")]
    hand = "" if meta.get("device") == "static" else answers_table(results, {r["answer"]: _rel(r["answer"], sweep)
                                                                               for r in results})
    if hand:
        parts += ["### Verdicts read by hand", hand]
    slow = sorted((r for r in results if "seconds" in r), key=lambda r: -r["seconds"])[:1]
    if slow:
        total = sum(r["seconds"] for r in results if "seconds" in r)
        parts.append(f"Judging time: {total:.0f} s summed over answers; slowest {slow[0]['seconds']:.0f} s "
                     f"({_rel(slow[0]['answer'], sweep)}).")
    return "\n\n".join(parts) + "\n"


def _rel(path: str, sweep: Path) -> str:
    try:
        return str(Path(path).relative_to(sweep))
    except ValueError:
        return path


def review(results: list[dict], sweep: Path) -> str:
    """Every refusal with its answer, rule, message and (static mode) the refused line: for a human to judge."""
    lines = ["### Every refusal, for review", ""]
    for r in sorted(results, key=lambda r: r["answer"]):
        for v in r.get("violations", []):
            src = f"  `{v['line']}`" if v.get("line") else ""
            lines.append(f"- {_rel(r['answer'], sweep)} [{v['kind']} {v['rule']}] {v['message'][:300]}{src}")
        if r.get("cpu_sizes", "reduced") != "reduced":
            lines.append(f"- {_rel(r['problem'], sweep)} [cpu sizes] {r['cpu_sizes']}")
        if r["verdict"] in ("no_code", "syntax_error", "cli-error", "sweep-timeout"):
            lines.append(f"- {_rel(r['answer'], sweep)} [{r['verdict']}] {r.get('message', '')[:300]}")
    return "\n".join(lines) + "\n"

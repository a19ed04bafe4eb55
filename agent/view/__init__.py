"""Everything that draws in the terminal, and the one console factory. Builders return rich renderables and print
nothing; the commands decide where they go.

    terminal   console(): stdout or stderr, the terminal's width, $COLUMNS, or a wide page for a pipe
    fmt        verdict colours, times, speedups, tokens, money
    runs       leaderboard, run summary, one candidate, one evaluation (`agent eval`)
    suite      several answers judged together (`agent eval DIR`)
    profiles   one ncu report, the diff of two
    catalog    GPUs, stages, problems
    progress   LiveProgress: what `agent run` shows while it runs
"""

from __future__ import annotations

from agent.view.fmt import (
    VERDICT_STYLE,
    fmt_cost,
    fmt_ms,
    fmt_pct,
    fmt_tokens,
    fmt_value,
    fmt_x,
    speedup_text,
    verdict_text,
)
from agent.view.progress import LiveProgress
from agent.view.runs import (
    candidate_view,
    checks_table,
    eval_view,
    leaderboard_fitting,
    leaderboard_table,
    metrics_table,
    run_summary,
    runs_table,
    short_candidate_id,
    timing_table,
)
from agent.view.suite import suite_view
from agent.view.terminal import console

__all__ = [
    "VERDICT_STYLE", "LiveProgress", "candidate_view", "checks_table", "console", "diff_view",
    "eval_view", "fmt_cost", "fmt_ms", "fmt_pct", "fmt_tokens", "fmt_value", "fmt_x", "gpu_table",
    "leaderboard_fitting", "leaderboard_table", "metrics_table", "problem_table", "profile_view", "run_summary", "runs_table",
    "short_candidate_id", "speedup_text", "ladder_table", "suite_view", "timing_table", "verdict_text",
]


def __getattr__(name: str):  # profiles and catalogs import ncu and prompts: only when asked for
    if name in ("profile_view", "diff_view", "fmt_metric"):
        from agent.view import profiles

        return getattr(profiles, name)
    if name in ("gpu_table", "ladder_table", "problem_table"):
        from agent.view import catalog

        return getattr(catalog, name)
    raise AttributeError(f"module 'agent.view' has no attribute {name!r}")

"""`agent prompts RUN_ID`: re-render every iteration's prompt from what the run recorded, without a GPU.

Each prompt is rebuilt from the stored parts (stage, the best-so-far candidate's code and ncu profile, the
previous iteration's verdicts) and compared with the prompt the run actually sent.
"""

from __future__ import annotations

from pydantic import BaseModel

from agent.catalog import resolve_gpu
from agent.loop import best_from_store, iteration_prompt, round_results
from agent.problems import load_problem
from agent.stages import get_stage


class ReplayedIteration(BaseModel):
    iteration: int
    stage: str
    reason: str
    best_before: str | None
    prompt: str
    matches: bool


def rerender_run(store, run_id: str) -> list[ReplayedIteration]:
    """One entry per iteration that sent a prompt (iteration 0, the starting kernel, sends none)."""
    run_id = store.resolve_run(run_id)
    run = store.get_run(run_id)
    problem = load_problem(run.config.problem)
    gpu = resolve_gpu(run.gpu)
    out = []
    for it in store.iterations(run_id):
        if not it.prompt:
            continue
        # the previous iteration's latest attempt: an attempt cut short by a kill was never anyone's feedback
        last_results = round_results(store, run_id, it.iteration - 1) if it.iteration > 1 else []
        best = best_from_store(store, it.best_before, run.config.objective)
        prompt = iteration_prompt(get_stage(it.stage), gpu, problem, best, last_results, run.config.diagnosis)
        out.append(ReplayedIteration(iteration=it.iteration, stage=it.stage, reason=it.reason,
                                     best_before=it.best_before, prompt=prompt, matches=prompt == it.prompt))
    return out

"""`agent prompts RUN_ID`: re-render every iteration's prompt from what the run recorded, without a GPU.

Each prompt is rebuilt from the stored parts (stage, the parent candidate's code and ncu profile, the previous
iteration's verdicts, the memory of the iterations before) and compared with the prompt the run actually sent; a
round with several parents (agent.search) has one prompt per parent.
"""

from __future__ import annotations

from pydantic import BaseModel

from agent.catalog import resolve_gpu
from agent.loop import best_from_store, round_results
from agent.prompts import iteration_prompt
from agent.memory import lines
from agent.problems import load_problem
from agent.search import SearchState
from agent.stages import get_stage


class ReplayedIteration(BaseModel):
    iteration: int
    stage: str
    reason: str
    best_before: str | None
    parent: str | None = None
    prompt: str
    matches: bool


def rerender_run(store, run_id: str) -> list[ReplayedIteration]:
    """One entry per prompt sent, in order (iteration 0, the starting kernel, sends none)."""
    run_id = store.resolve_run(run_id)
    run = store.get_run(run_id)
    config = run.config
    problem = load_problem(config.problem)
    gpu = resolve_gpu(run.gpu)
    memory = SearchState.of(store.candidates(run_id), config.search, config.objective, config.beam)
    out = []
    for it in store.iterations(run_id):
        if not it.prompt:
            continue
        # the previous iteration's latest attempt: an attempt cut short by a kill was never anyone's feedback
        last_results = round_results(store, run_id, it.iteration - 1) if it.iteration > 1 else []
        remembered = lines(memory.remembered(before=it.iteration), run_id) if config.memory else []
        for g in it.plan(config.samples):
            parent = best_from_store(store, g.parent, config.objective)
            prompt = iteration_prompt(get_stage(g.stage), gpu, problem, parent, last_results, config.diagnosis,
                                      remembered, config.precision)
            out.append(ReplayedIteration(iteration=it.iteration, stage=g.stage, reason=it.reason,
                                         best_before=it.best_before, parent=g.parent, prompt=prompt,
                                         matches=prompt == g.prompt))
    return out

"""Iteration 0's answers (agent.protocols.Starter): the problem's own starting kernel, torch.compile's kernels for
its Model made into an answer (agent.inductor, GPU only), or both. Whatever of them exists is judged first and the
fastest correct one is the run's first current best."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agent.errors import AgentError
from agent.problems import starting_code
from agent.protocols import Progress
from agent.schema import Answer, ProblemSpec

StartKind = Literal["problem", "inductor", "both"]


@dataclass(frozen=True)
class Starts:
    kind: StartKind = "problem"
    device: str = "cuda"
    hide: tuple[Path, ...] = ()  # directories the capturing worker must not see (the store)

    def answers(self, problem: ProblemSpec, progress: Progress) -> list[Answer]:
        out = []
        code = starting_code(problem) if self.kind in ("problem", "both") else None
        if code is not None:
            out.append(Answer(text=code, model="start", idea="starting kernel"))
        if self.kind in ("inductor", "both"):
            from agent.inductor.start import CPU_NOTICE, start_from_inductor

            if self.device != "cuda":
                progress.message(f"{CPU_NOTICE}: iteration 0 without it")
                return out
            progress.phase("capturing", f"torch.compile's kernels for {problem.name} at {len(problem.sizes)} sizes")
            try:
                out.append(Answer(text=start_from_inductor(problem, self.device, list(self.hide)), model="inductor",
                                  idea="torch.compile's own kernels"))
            except AgentError as e:  # a construct the translation does not know, a failed capture: go on without it
                progress.message(f"no Inductor start: {e.message}")
        return out

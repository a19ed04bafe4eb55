"""The agent's error types: each carries a one-line message and an optional hint; the CLI prints them as one red
line (no traceback) and exits 2 for a user's mistake, 1 for the harness's own failure. A normal end of a run (a
budget spent, a replay exhausted) is not an error: proposers say it in agent.protocols.Proposal.stop."""

from __future__ import annotations


class AgentError(Exception):
    """Something the agent cannot go on with, said in one line (plus a hint where one helps)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class UserError(AgentError):
    """A mistake the user can fix (bad flag, unknown GPU, unreadable file): exit 2."""


class HarnessError(AgentError):
    """The harness cannot evaluate at all (the problem's own Model fails, no sandbox can be built): not the
    candidate's fault, and not a usage mistake either: exit 1, in `agent eval` and `agent run` alike."""


class Interrupted(KeyboardInterrupt):
    """A stop signal (Ctrl-C, SIGTERM from `timeout` or a scheduler, SIGHUP from a closed terminal): the CLI says
    `message` in one line and exits 128 + the signal's number, as a shell would report it."""

    def __init__(self, signum: int, message: str = "interrupted", hint: str | None = None) -> None:
        super().__init__(message)
        self.signum, self.message, self.hint = signum, message, hint


def unknown(kind: str, value: str, choices: list[str] | tuple[str, ...]) -> UserError:
    """'unknown stage 'x'; choose from: a, b, c' — the error every lookup by name raises."""
    return UserError(f"unknown {kind} {value!r}; choose from: {', '.join(choices)}")

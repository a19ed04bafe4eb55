"""The one error type for user mistakes: the CLI prints it as one red line and exits 2."""

from __future__ import annotations


class UserError(Exception):
    """A mistake the user can fix (bad flag, unknown GPU, unreadable file): message plus an optional hint."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class StopRun(UserError):
    """A proposer's normal reason to end a run early (budget spent, replay exhausted): not a failure."""


def unknown(kind: str, value: str, choices: list[str] | tuple[str, ...]) -> UserError:
    """'unknown stage 'x'; choose from: a, b, c' — the error every lookup by name raises."""
    return UserError(f"unknown {kind} {value!r}; choose from: {', '.join(choices)}")

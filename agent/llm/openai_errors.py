"""One actionable line for each way an OpenAI-compatible server or the network can fail."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from agent.errors import UserError

if TYPE_CHECKING:  # the SDK is imported lazily: `agent --help` must stay fast
    import openai


def _one_line(text: object, limit: int = 300) -> str:
    line = re.sub(r"\s+", " ", str(text)).strip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


def user_error(err: openai.OpenAIError, attempts: int, server: str, model: str, timeout_s: float) -> UserError:
    """One line a user can act on, for each way the server or the network can fail."""
    import openai

    tries = f"after {attempts} attempt{'s' if attempts != 1 else ''}"
    if isinstance(err, openai.APITimeoutError):
        return UserError(
            f"no answer from {server} within {timeout_s:g} s ({tries})",
            hint="the model may be slow or the server overloaded: raise --llm-timeout",
        )
    if isinstance(err, openai.APIConnectionError):
        return UserError(
            f"cannot reach {server}: {_one_line(err.__cause__ or err)} ({tries})",
            hint="is the server running? check OPENAI_BASE_URL",
        )
    if not isinstance(err, openai.APIStatusError):
        return UserError(f"OpenAI client error talking to {server}: {_one_line(err)}")
    detail = _error_detail(err)
    code = getattr(err, "code", None)
    status = err.status_code
    if isinstance(err, openai.AuthenticationError):
        return UserError(
            f"{server} rejected the API key in OPENAI_API_KEY (401): {detail}", hint="check OPENAI_API_KEY"
        )
    if isinstance(err, openai.PermissionDeniedError):
        return UserError(
            f"{server} denied access to model {model!r} (403): {detail}", hint="check --model and the key's project"
        )
    if isinstance(err, openai.NotFoundError):
        if code == "model_not_found" or "model" in detail.lower():
            return UserError(f"model {model!r} not found at {server} (404): {detail}", hint="check --model")
        return UserError(
            f"{server} has no chat completions endpoint for model {model!r} (404): {detail}",
            hint="check OPENAI_BASE_URL; it usually ends in /v1",
        )
    if isinstance(err, openai.RateLimitError):
        hint = "the account has no quota left" if code == "insufficient_quota" else "wait, or lower --samples"
        return UserError(f"rate limited by {server} (429) {tries}: {detail}", hint=hint)
    if isinstance(err, openai.BadRequestError):
        return UserError(f"{server} rejected the request for model {model!r} (400): {detail}")
    if status >= 500:
        return UserError(
            f"{server} failed with HTTP {status} {tries}: {detail}", hint="the server is in trouble: try later"
        )
    return UserError(f"{server} answered HTTP {status} for model {model!r}: {detail}")


def _error_detail(err: openai.APIStatusError) -> str:
    """The server's own message ('Incorrect API key provided ...'), not the SDK's repr of the whole body."""
    body = err.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return _one_line(body["message"])
    if isinstance(body, str) and body.strip():
        return _one_line(body, 200)
    return _one_line(err.response.text or err.response.reason_phrase, 200)

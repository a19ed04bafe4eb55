"""Proposers: where candidate kernels come from (an OpenAI-compatible server, or a recorded run).

A proposer turns one prompt into K answers. `OpenAIProposer` asks any OpenAI-compatible chat
completions server (OpenAI itself, vLLM, Ollama, LM Studio) through the `openai` SDK, whose own
`max_retries`/`timeout` do the backoff on 429, 5xx and timeouts; it prices every call from
`agent/data/prices.toml` and refuses a call that could overrun the budget. `ReplayProposer`
serves the answers of an earlier run, in order, so a run reproduces with no network.
The offline proposer lives in `agent.offline` and satisfies the same `Proposer` protocol.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import time
import tomllib
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from agent.errors import StopRun, UserError
from agent.schema import Answer, Usage

if TYPE_CHECKING:  # the SDK is imported lazily: `agent --help` must stay fast
    import httpx2
    import openai

log = logging.getLogger(__name__)

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"

# Called once per HTTP exchange (failed ones included) with the request payload and the raw response body.
OnCall = Callable[[dict[str, Any], str], None]


@runtime_checkable
class Proposer(Protocol):
    name: str

    def propose(self, prompt: str, k: int) -> list[Answer]: ...


# ---------------------------------------------------------------- prices and budget


class Price(BaseModel):
    """USD per 1M tokens for one model; `reasoning` models take max_completion_tokens and no temperature."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0, description="USD per 1M prompt tokens")
    output: float = Field(ge=0, description="USD per 1M completion tokens")
    reasoning: bool = False

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1e6


@cache
def load_prices() -> dict[str, Price]:
    """The price table shipped in agent/data/prices.toml, by model name."""
    text = resources.files("agent").joinpath("data/prices.toml").read_text(encoding="utf-8")
    return {name: Price.model_validate(entry) for name, entry in tomllib.loads(text)["models"].items()}


# Dated snapshots: "gpt-4o-2024-08-06", "gpt-4-0613".
_SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{4})$")


def price_for(model: str) -> Price | None:
    """The model's price: exact name first, then its name without a snapshot date; None if unknown."""
    prices = load_prices()
    return prices.get(model) or prices.get(_SNAPSHOT.sub("", model))


def estimate_tokens(text: str) -> int:
    """A cheap token count for budgeting: characters / 4, rounded up (no tokenizer dependency)."""
    return math.ceil(len(text) / 4)


class BudgetExceeded(StopRun):
    """The next call could spend more than what is left of --budget-usd."""


class Budget(BaseModel):
    """Money left for LLM calls: check the worst case before a call, charge the real usage after it."""

    limit_usd: float | None = Field(default=None, ge=0, description="None: no limit")
    spent_usd: float = 0.0

    @property
    def remaining_usd(self) -> float | None:
        return None if self.limit_usd is None else self.limit_usd - self.spent_usd

    def check(self, estimate_usd: float) -> None:
        """Raise BudgetExceeded if a call costing up to `estimate_usd` could overrun the limit."""
        if self.limit_usd is not None and self.spent_usd + estimate_usd > self.limit_usd:
            raise BudgetExceeded(
                f"budget ${self.limit_usd:.2f} would be exceeded: ${self.spent_usd:.4f} spent, "
                f"the next call could cost up to ${estimate_usd:.4f}",
                hint="raise --budget-usd, or lower --samples or max_tokens",
            )

    def charge(self, usage: Usage) -> None:
        self.spent_usd += usage.cost_usd


# ---------------------------------------------------------------- OpenAI-compatible servers


def _env_base_url() -> str | None:
    return os.environ.get("OPENAI_BASE_URL") or None


def _env_api_key() -> SecretStr | None:
    key = os.environ.get("OPENAI_API_KEY")
    return SecretStr(key) if key else None


class OpenAIConfig(BaseModel):
    """How to reach the server and what to ask it; the key and URL default to the usual environment variables."""

    model_config = ConfigDict(extra="forbid")

    model: str = "gpt-4o"
    base_url: str | None = Field(default_factory=_env_base_url, description="None: OpenAI's own API")
    api_key: SecretStr | None = Field(default_factory=_env_api_key)
    # Answers of thousands of tokens take minutes on slow servers; the SDK's own default is 600 s.
    timeout_s: float = Field(default=300.0, gt=0)
    max_retries: int = Field(default=4, ge=0, description="SDK retries on 408/409/429/5xx, timeouts, lost connections")
    temperature: float | None = Field(default=0.8, description="None: server default; not sent to reasoning models")
    max_tokens: int = Field(default=8192, gt=0, description="completion tokens per sample; bounds the budget check")
    system: str | None = Field(default=None, description="system message; the stage prompts already carry their role")
    price: Price | None = Field(default=None, description="overrides the price table (e.g. for a local model)")
    reasoning: bool | None = Field(default=None, description="None: as the price table says")


def _one_line(text: object, limit: int = 300) -> str:
    line = re.sub(r"\s+", " ", str(text)).strip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


class _Exchange(BaseModel):
    payload: dict[str, Any]
    body: str


class OpenAIProposer:
    """K samples per prompt from a chat completions endpoint, priced, budgeted and logged exchange by exchange."""

    def __init__(self, config: OpenAIConfig, budget: Budget | None = None, on_call: OnCall | None = None) -> None:
        import openai

        if config.api_key is None:
            raise UserError("OPENAI_API_KEY is not set", hint="export OPENAI_API_KEY=..., or use --llm offline")
        self.config = config
        self.name = f"openai:{config.model}"
        self.base_url = (config.base_url or OPENAI_DEFAULT_URL).rstrip("/")
        self.budget = budget
        self.on_call = on_call
        table_price = price_for(config.model)
        self.price = config.price or table_price
        if self.price is None:
            if budget is not None and budget.limit_usd is not None:
                raise UserError(
                    f"no price known for model {config.model!r}, so --budget-usd cannot be enforced",
                    hint="add the model to agent/data/prices.toml, or run without --budget-usd",
                )
            log.warning("no price known for model %r: its calls are recorded at cost 0", config.model)
        self.reasoning = config.reasoning if config.reasoning is not None else bool(self.price and self.price.reasoning)

        # Event hooks see every HTTP attempt, including the ones the SDK retries, so the run can save them all.
        self._sent: list[httpx2.Request] = []
        self._exchanges: list[_Exchange] = []
        http = openai.DefaultHttpxClient(event_hooks={"request": [self._sent_hook], "response": [self._received_hook]})
        self._client = openai.OpenAI(
            api_key=config.api_key.get_secret_value(),
            base_url=self.base_url,
            timeout=config.timeout_s,
            max_retries=config.max_retries,
            http_client=http,
        )

    # -- public

    def propose(self, prompt: str, k: int) -> list[Answer]:
        """K answers; asks for n=k, and again for the rest when a server returns fewer choices (some ignore n)."""
        if k < 1:
            raise ValueError(f"k must be at least 1, not {k}")
        answers: list[Answer] = []
        while len(answers) < k:
            answers += self._call(prompt, k - len(answers))
        return answers

    def worst_case_usd(self, prompt: str, n: int) -> float:
        """Cost bound of one call: the prompt at chars/4 tokens plus max_tokens for each of n samples."""
        if self.price is None:
            return 0.0
        prompt_tokens = estimate_tokens(prompt) + estimate_tokens(self.config.system or "")
        return self.price.cost(prompt_tokens, self.config.max_tokens * n)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAIProposer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one HTTP call (with the SDK's retries inside)

    def _params(self, prompt: str, n: int) -> dict[str, Any]:
        messages = [{"role": "system", "content": self.config.system}] if self.config.system else []
        messages.append({"role": "user", "content": prompt})
        params: dict[str, Any] = {"model": self.config.model, "messages": messages, "n": n}
        if self.reasoning:
            params["max_completion_tokens"] = self.config.max_tokens
        else:
            params["max_tokens"] = self.config.max_tokens
            if self.config.temperature is not None:
                params["temperature"] = self.config.temperature
        return params

    def _call(self, prompt: str, n: int) -> list[Answer]:
        import openai

        if self.budget is not None:
            self.budget.check(self.worst_case_usd(prompt, n))
        self._sent.clear()
        self._exchanges.clear()
        start = time.monotonic()
        failure: str | None = None
        try:
            raw = self._client.chat.completions.with_raw_response.create(**self._params(prompt, n))
            body = raw.text
        except openai.OpenAIError as err:
            failure = _one_line(f"{type(err).__name__}: {err.__cause__ or err}")
            raise self._user_error(err, attempts=len(self._exchanges) + len(self._sent)) from err
        finally:
            self._flush(failure or "no response (timed out or lost connection); the client retried")
        latency = time.monotonic() - start
        return self._answers(body, prompt, n, latency)

    def _answers(self, body: str, prompt: str, n: int, latency: float) -> list[Answer]:
        """Parse one response body into answers; usage is split evenly so that the answers sum to the call."""
        texts, data = self._texts(body)
        texts = texts[:n]  # a server that returns more than asked: keep n, but the call's full usage is charged
        usage = self._usage(data.get("usage"), prompt, texts)
        if self.budget is not None:
            self.budget.charge(usage)
        model = data.get("model") if isinstance(data.get("model"), str) and data.get("model") else self.config.model
        return [
            Answer(text=text, model=model, usage=part, latency_s=latency, raw=body)
            for text, part in zip(texts, self._split(usage, len(texts)), strict=True)
        ]

    def _texts(self, body: str) -> tuple[list[str], dict[str, Any]]:
        where = f"malformed response from {self.base_url}"
        try:
            data = json.loads(body)
        except json.JSONDecodeError as err:
            raise UserError(
                f"{where}: not JSON ({err.msg} at character {err.pos})",
                hint="check that OPENAI_BASE_URL is an OpenAI-compatible endpoint, usually ending in /v1",
            ) from None
        if not isinstance(data, dict):
            raise UserError(f"{where}: a JSON {type(data).__name__}, not an object")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise UserError(f"{where}: no choices in {_one_line(body, 120)}")
        if all(isinstance(c, dict) and isinstance(c.get("index"), int) for c in choices):
            choices = sorted(choices, key=lambda c: c["index"])
        texts = []
        for i, choice in enumerate(choices):
            message = choice.get("message") if isinstance(choice, dict) else None
            content = message.get("content") if isinstance(message, dict) else None
            if content is None and isinstance(message, dict) and isinstance(message.get("refusal"), str):
                log.warning("the model refused choice %d: %s", i, _one_line(message["refusal"]))
                content = message["refusal"]  # the harness will find no code in it
            if not isinstance(content, str):
                raise UserError(f"{where}: choice {i} has no message content")
            texts.append(content)
        return texts, data

    def _usage(self, reported: object, prompt: str, texts: list[str]) -> Usage:
        if isinstance(reported, dict) and isinstance(reported.get("prompt_tokens"), int):
            prompt_tokens = reported["prompt_tokens"]
            completion_tokens = reported.get("completion_tokens")
            if not isinstance(completion_tokens, int):
                completion_tokens = sum(estimate_tokens(t) for t in texts)
        else:
            log.warning("%s reported no token usage: estimating it as characters/4", self.base_url)
            prompt_tokens = estimate_tokens(prompt) + estimate_tokens(self.config.system or "")
            completion_tokens = sum(estimate_tokens(t) for t in texts)
        cost = self.price.cost(prompt_tokens, completion_tokens) if self.price else 0.0
        return Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cost_usd=cost)

    def _split(self, total: Usage, parts: int) -> list[Usage]:
        prompt_each, prompt_left = divmod(total.prompt_tokens, parts)
        completion_each, completion_left = divmod(total.completion_tokens, parts)
        shares = []
        for i in range(parts):
            p = prompt_each + (i < prompt_left)
            c = completion_each + (i < completion_left)
            cost = self.price.cost(p, c) if self.price else 0.0
            shares.append(Usage(prompt_tokens=p, completion_tokens=c, cost_usd=cost))
        return shares

    # -- errors

    def _user_error(self, err: openai.OpenAIError, attempts: int) -> UserError:
        """One line a user can act on, for each way the server or the network can fail."""
        import openai

        server, model = self.base_url, self.config.model
        tries = f"after {attempts} attempt{'s' if attempts != 1 else ''}"
        if isinstance(err, openai.APITimeoutError):
            return UserError(
                f"no answer from {server} within {self.config.timeout_s:g} s ({tries})",
                hint="the model may be slow or the server overloaded: raise the timeout",
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

    # -- the exchange log (httpx event hooks run inside the SDK's retry loop)

    def _sent_hook(self, request: httpx2.Request) -> None:
        # A request still waiting when the next one goes out got no response: the SDK retried it.
        self._flush_waiting("no response (timed out or lost connection); the client retried")
        self._sent.append(request)

    def _received_hook(self, response: httpx2.Response) -> None:
        response.read()
        request = response.request
        self._sent = [r for r in self._sent if r is not request]
        self._exchanges.append(_Exchange(payload=_payload(request), body=response.text))

    def _flush_waiting(self, reason: str) -> None:
        for request in self._sent:
            body = json.dumps({"error": {"message": reason, "type": "agent_no_response"}})
            self._exchanges.append(_Exchange(payload=_payload(request), body=body))
        self._sent.clear()

    def _flush(self, reason: str) -> None:
        """Hand every exchange of the call to on_call, outside the SDK (a failing hook is not a network error)."""
        self._flush_waiting(reason)
        exchanges, self._exchanges = self._exchanges, []
        if self.on_call is not None:
            for exchange in exchanges:
                self.on_call(exchange.payload, exchange.body)


def _payload(request: httpx2.Request) -> dict[str, Any]:
    try:
        payload = json.loads(request.content)
    except (ValueError, UnicodeDecodeError):
        return {"unparsed": request.content.decode("utf-8", errors="replace")}
    return payload if isinstance(payload, dict) else {"unparsed": payload}


def _error_detail(err: openai.APIStatusError) -> str:
    """The server's own message ('Incorrect API key provided ...'), not the SDK's repr of the whole body."""
    body = err.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return _one_line(body["message"])
    if isinstance(body, str) and body.strip():
        return _one_line(body, 200)
    return _one_line(err.response.text or err.response.reason_phrase, 200)


# ---------------------------------------------------------------- replay


class ReplayProposer:
    """Serves the answers of an earlier run in the order they were recorded, K per call."""

    def __init__(self, answers: list[Answer], name: str = "replay") -> None:
        self.name = name
        self._answers = list(answers)
        self._next = 0

    @property
    def remaining(self) -> int:
        return len(self._answers) - self._next

    def propose(self, prompt: str, k: int) -> list[Answer]:
        """The next k recorded answers; the last call may get fewer (a run killed mid-iteration recorded fewer)."""
        if k < 1:
            raise ValueError(f"k must be at least 1, not {k}")
        if self.remaining == 0:
            raise StopRun(
                f"replay ran out of answers: the recorded run has {len(self._answers)}, all served",
                hint="replay with no more --iterations and the same --samples as the recorded run",
            )
        if self.remaining < k:
            log.warning("replay: %d answers asked, only %d recorded ones left", k, self.remaining)
        served = self._answers[self._next : self._next + k]
        self._next += len(served)
        return served

"""The OpenAI-compatible proposer: K samples per prompt through the `openai` SDK, priced, budgeted, logged.

Any chat completions server works (OpenAI itself, vLLM, Ollama, LM Studio); the SDK's own
`max_retries`/`timeout` do the backoff on 429, 5xx and timeouts. Every call is priced from
`agent/data/prices.toml` and refused when it could overrun the budget.
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from agent.errors import UserError
from agent.llm.base import OnCall
from agent.llm.openai_errors import _one_line, user_error
from agent.llm.pricing import Budget, BudgetExceeded, Price, estimate_tokens, price_for
from agent.protocols import Proposal, ProposalContext
from agent.redact import scrub
from agent.schema import Answer, Usage

if TYPE_CHECKING:  # the SDK is imported lazily: `agent --help` must stay fast
    import httpx2
    import openai

log = logging.getLogger(__name__)

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"


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
        # The shipped table is OpenAI's price list: it prices OpenAI's own API. Any other endpoint (a local server, a
        # proxy) is priced only by the user (OpenAIConfig.price, from the user config); else its cost is unknown.
        table_price = price_for(config.model)
        self.price = config.price or (table_price if self.base_url == OPENAI_DEFAULT_URL else None)
        if self.price is None:
            if budget is not None and budget.limit_usd is not None:
                raise UserError(
                    f"no price known for model {config.model!r} at {self.base_url}, so --budget-usd cannot be enforced",
                    hint="give its price in the user config ([prices.\"MODEL\"] input/output per 1M tokens), or run "
                         "without --budget-usd",
                )
            log.info("no price known for model %r at %s: its cost is recorded as unknown", config.model, self.base_url)
        # Which parameters a model takes is the model's, wherever it is served: the table knows the names.
        known = self.price if config.price is not None else table_price
        self.reasoning = config.reasoning if config.reasoning is not None else bool(known and known.reasoning)

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

    def preflight(self, timeout_s: float = 15.0) -> None:
        """One cheap request (the model list) before anything is evaluated or recorded: an endpoint that is down, or
        that rejects the key, is one line now rather than a failed run after the starting kernel's evaluation. An
        endpoint without a model list (404 and the like) passes: the first real call will say more."""
        import openai

        assert self.config.api_key is not None  # checked in __init__
        client = openai.OpenAI(api_key=self.config.api_key.get_secret_value(), base_url=self.base_url,
                               timeout=timeout_s, max_retries=0)
        try:
            client.models.list()
        except (openai.AuthenticationError, openai.PermissionDeniedError) as e:
            raise UserError(f"{self.base_url} rejected the API key ({e.status_code}): {scrub(_one_line(e))}",
                            hint="check OPENAI_API_KEY") from None
        except openai.APIConnectionError as e:  # refused, unresolvable, timed out
            raise UserError(f"cannot reach the model endpoint {self.base_url}: {_one_line(e)}",
                            hint="check OPENAI_BASE_URL and the network, or use --llm offline") from None
        except openai.APIStatusError as e:
            log.info("the endpoint has no model list (%s): going on", e.status_code)
        finally:
            client.close()

    def propose(self, ctx: ProposalContext) -> Proposal:
        """K answers; asks for n=k, and again for the rest when a server returns fewer choices (some ignore n).
        A call the budget cannot cover is not made: the answers so far, and the budget as the reason to stop."""
        answers: list[Answer] = []
        try:
            while len(answers) < ctx.k:
                answers += self._call(ctx.prompt, ctx.k - len(answers))
        except BudgetExceeded as e:
            return Proposal(answers=answers, stop=e.message)
        return Proposal(answers=answers)

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
        reported = data.get("model")
        model = reported if isinstance(reported, str) and reported else self.config.model
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
        return Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cost_usd=cost,
                     priced=self.price is not None)

    def _split(self, total: Usage, parts: int) -> list[Usage]:
        prompt_each, prompt_left = divmod(total.prompt_tokens, parts)
        completion_each, completion_left = divmod(total.completion_tokens, parts)
        shares = []
        for i in range(parts):
            p = prompt_each + (i < prompt_left)
            c = completion_each + (i < completion_left)
            cost = self.price.cost(p, c) if self.price else 0.0
            shares.append(Usage(prompt_tokens=p, completion_tokens=c, cost_usd=cost, priced=self.price is not None))
        return shares

    # -- errors

    def _user_error(self, err: openai.OpenAIError, attempts: int) -> UserError:
        """One line a user can act on, for each way the server or the network can fail."""
        return user_error(err, attempts, self.base_url, self.config.model, self.config.timeout_s)

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

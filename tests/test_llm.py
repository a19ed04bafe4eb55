"""Proposers: the real openai client against a real local HTTP server (tests/fake_openai.py), no mocks."""

from __future__ import annotations

import json
import logging
import math
import socket

import pytest
from fake_openai import (  # the fake_openai fixture itself comes from conftest's pytest_plugins
    malformed,
    missing_choices,
    model_not_found,
    rate_limited,
    reply,
    server_error,
    slow,
    status,
    unauthorized,
)

from agent.errors import UserError
from agent.llm import (
    Budget,
    BudgetExceeded,
    OpenAIConfig,
    OpenAIProposer,
    Price,
    ReplayProposer,
    load_prices,
    price_for,
)
from agent.protocols import ProposalContext, Proposer
from agent.schema import Answer, Usage


def ctx(prompt: str, k: int) -> ProposalContext:
    return ProposalContext(prompt=prompt, k=k, stage="memory-fusion")

KERNEL = "```python\nimport triton\n```"


def config(server, **overrides) -> OpenAIConfig:
    """Fast settings: short timeout, few retries; the fake server's Retry-After headers keep backoff short. The model
    is priced as OpenAI prices it (as a user would set it in the config: a local server has no price of its own)."""
    settings = dict(model="gpt-4o", base_url=server.base_url, api_key="sk-test", timeout_s=0.3, max_retries=2)
    settings |= overrides
    settings.setdefault("price", price_for(str(settings["model"])))
    return OpenAIConfig(**settings)


def one_line(err: pytest.ExceptionInfo[UserError]) -> str:
    text = str(err.value)
    assert "\n" not in text
    return text


# ---------------------------------------------------------------- samples


def test_asks_for_k_samples_in_one_request(fake_openai):
    fake_openai.script([reply("first", "second", "third")])
    answers = OpenAIProposer(config(fake_openai)).propose(ctx("write a kernel", 3)).answers
    assert [a.text for a in answers] == ["first", "second", "third"]
    assert len(fake_openai.requests) == 1
    request = fake_openai.requests[0]
    assert request["n"] == 3 and request["model"] == "gpt-4o"
    assert request["messages"] == [{"role": "user", "content": "write a kernel"}]
    assert fake_openai.authorizations == ["Bearer sk-test"]


def test_tops_up_when_the_server_returns_fewer_choices_than_asked(fake_openai):
    fake_openai.script([reply("a", max_choices=1), reply("b", "c", max_choices=2), reply("d")])
    answers = OpenAIProposer(config(fake_openai)).propose(ctx("p", 4)).answers
    assert [a.text for a in answers] == ["a", "b", "c", "d"]
    assert [r["n"] for r in fake_openai.requests] == [4, 3, 1]


def test_keeps_k_when_the_server_returns_more_choices(fake_openai):
    fake_openai.script([status(200, {"model": "gpt-4o", "choices": [
        {"index": i, "message": {"role": "assistant", "content": str(i)}} for i in range(3)
    ], "usage": {"prompt_tokens": 10, "completion_tokens": 30}})])
    answers = OpenAIProposer(config(fake_openai)).propose(ctx("p", 2)).answers
    assert [a.text for a in answers] == ["0", "1"]
    assert sum(a.usage.completion_tokens for a in answers) == 30  # what the call cost, all of it


def test_system_prompt_goes_first_when_configured(fake_openai):
    fake_openai.script([reply()])
    OpenAIProposer(config(fake_openai, system="You write Triton.")).propose(ctx("p", 1)).answers
    assert [m["role"] for m in fake_openai.requests[0]["messages"]] == ["system", "user"]


def test_reasoning_models_get_max_completion_tokens_and_no_temperature(fake_openai):
    fake_openai.script([reply(), reply()])
    OpenAIProposer(config(fake_openai, model="o4-mini", max_tokens=100)).propose(ctx("p", 1)).answers
    OpenAIProposer(config(fake_openai, model="gpt-4o", max_tokens=100, temperature=0.5)).propose(ctx("p", 1)).answers
    reasoning, chat = fake_openai.requests
    assert reasoning["max_completion_tokens"] == 100
    assert "max_tokens" not in reasoning and "temperature" not in reasoning
    assert chat["max_tokens"] == 100 and chat["temperature"] == 0.5


def test_each_answer_carries_usage_latency_model_and_raw_body(fake_openai):
    fake_openai.script([reply(KERNEL, "other", model="gpt-4o-2024-08-06",
                              usage={"prompt_tokens": 1001, "completion_tokens": 501})])
    answers = OpenAIProposer(config(fake_openai)).propose(ctx("p", 2)).answers
    assert all(a.model == "gpt-4o-2024-08-06" for a in answers)  # what the server says it ran
    assert all(a.latency_s > 0 for a in answers)
    assert json.loads(answers[0].raw)["choices"][0]["message"]["content"] == KERNEL
    assert [a.usage.prompt_tokens for a in answers] == [501, 500]
    assert [a.usage.completion_tokens for a in answers] == [251, 250]
    total = sum((a.usage for a in answers), Usage())
    assert total.cost_usd == pytest.approx((1001 * 2.50 + 501 * 10.00) / 1e6)


def test_usage_and_cost_sum_over_calls_and_charge_the_budget(fake_openai):
    usage = {"prompt_tokens": 1_000_000, "completion_tokens": 100_000}
    fake_openai.script([reply("a", max_choices=1, usage=usage), reply("b", usage=usage)])
    budget = Budget(limit_usd=100)
    answers = OpenAIProposer(config(fake_openai, model="gpt-4o-mini"), budget=budget).propose(ctx("p", 2)).answers
    total = sum((a.usage for a in answers), Usage())
    assert (total.prompt_tokens, total.completion_tokens) == (2_000_000, 200_000)
    assert total.cost_usd == pytest.approx(2 * (0.15 + 0.1 * 0.60))
    assert budget.spent_usd == pytest.approx(total.cost_usd)


def test_estimates_usage_when_the_server_reports_none(fake_openai, caplog):
    fake_openai.script([status(200, {"choices": [{"index": 0, "message": {"content": "x" * 40}}]})])
    [answer] = OpenAIProposer(config(fake_openai)).propose(ctx("y" * 400, 1)).answers
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (100, 10)
    assert answer.model == "gpt-4o"
    assert "reported no token usage" in caplog.text


# ---------------------------------------------------------------- retries (the SDK's own)


def test_retries_a_429_then_succeeds(fake_openai):
    fake_openai.script([rate_limited(0.01), rate_limited(0.01), reply("done")])
    [answer] = OpenAIProposer(config(fake_openai, max_retries=2)).propose(ctx("p", 1)).answers
    assert answer.text == "done"
    assert len(fake_openai.requests) == 3


def test_retries_a_500_then_succeeds(fake_openai):
    fake_openai.script([server_error(500), server_error(503), reply("done")])
    [answer] = OpenAIProposer(config(fake_openai, max_retries=2)).propose(ctx("p", 1)).answers
    assert answer.text == "done"
    assert len(fake_openai.requests) == 3


def test_retries_a_timeout_then_succeeds(fake_openai):
    fake_openai.script([slow(2.0), reply("done")])
    [answer] = OpenAIProposer(config(fake_openai, timeout_s=0.2, max_retries=1)).propose(ctx("p", 1)).answers
    assert answer.text == "done"
    assert len(fake_openai.requests) == 2


def test_rate_limit_retries_exhausted_is_one_line_with_attempts(fake_openai):
    fake_openai.script([rate_limited(0.01)] * 3)
    with pytest.raises(UserError) as err:
        OpenAIProposer(config(fake_openai, max_retries=2)).propose(ctx("p", 1)).answers
    assert "rate limited" in one_line(err) and "429" in str(err.value) and "after 3 attempts" in str(err.value)
    assert len(fake_openai.requests) == 3


def test_server_error_retries_exhausted_is_one_line(fake_openai):
    fake_openai.script([server_error(502)] * 2)
    with pytest.raises(UserError) as err:
        OpenAIProposer(config(fake_openai, max_retries=1)).propose(ctx("p", 1)).answers
    assert "HTTP 502 after 2 attempts" in one_line(err)


def test_timeouts_exhausted_name_the_timeout(fake_openai):
    fake_openai.script([slow(2.0), slow(2.0)])
    with pytest.raises(UserError) as err:
        OpenAIProposer(config(fake_openai, timeout_s=0.2, max_retries=1)).propose(ctx("p", 1)).answers
    assert "within 0.2 s" in one_line(err) and "2 attempts" in str(err.value)


def test_unreachable_server_says_so():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proposer = OpenAIProposer(OpenAIConfig(base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-test", max_retries=0))
    with pytest.raises(UserError) as err:
        proposer.propose(ctx("p", 1)).answers
    assert f"cannot reach http://127.0.0.1:{port}/v1" in one_line(err)
    assert "OPENAI_BASE_URL" in str(err.value)


# ---------------------------------------------------------------- user mistakes


def test_bad_key_names_the_key_variable(fake_openai):
    fake_openai.script([unauthorized()])
    with pytest.raises(UserError) as err:
        OpenAIProposer(config(fake_openai)).propose(ctx("p", 1)).answers
    assert "OPENAI_API_KEY" in one_line(err) and "401" in str(err.value)
    assert len(fake_openai.requests) == 1  # a 401 is not retried


def test_unknown_model_names_the_model(fake_openai):
    fake_openai.script([model_not_found()])
    with pytest.raises(UserError) as err:
        OpenAIProposer(config(fake_openai, model="gpt-nonexistent")).propose(ctx("p", 1)).answers
    assert "'gpt-nonexistent' not found" in one_line(err) and "--model" in str(err.value)


def test_wrong_base_url_path_points_at_the_base_url(fake_openai):
    proposer = OpenAIProposer(config(fake_openai, base_url=fake_openai.base_url.removesuffix("/v1")))
    with pytest.raises(UserError) as err:
        proposer.propose(ctx("p", 1)).answers
    assert "404" in one_line(err) and "OPENAI_BASE_URL" in str(err.value)


def test_missing_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(UserError, match="OPENAI_API_KEY is not set"):
        OpenAIProposer(OpenAIConfig(base_url="http://127.0.0.1:9/v1"))


def test_key_and_url_come_from_the_environment(monkeypatch, fake_openai):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    fake_openai.script([reply()])
    OpenAIProposer(OpenAIConfig()).propose(ctx("p", 1)).answers
    assert fake_openai.authorizations == ["Bearer sk-from-env"]
    assert "sk-from-env" not in repr(OpenAIConfig())  # the key stays out of logs and reprs


def test_response_that_is_not_json_is_a_clear_error(fake_openai):
    fake_openai.script([malformed()])
    with pytest.raises(UserError) as err:
        OpenAIProposer(config(fake_openai)).propose(ctx("p", 1)).answers
    assert "malformed response" in one_line(err) and "not JSON" in str(err.value)


def test_response_without_choices_is_a_clear_error(fake_openai):
    fake_openai.script([missing_choices()])
    with pytest.raises(UserError) as err:
        OpenAIProposer(config(fake_openai)).propose(ctx("p", 1)).answers
    assert "malformed response" in one_line(err) and "no choices" in str(err.value)


def test_choice_without_content_is_a_clear_error(fake_openai):
    fake_openai.script([status(200, {"choices": [{"index": 0, "message": {"role": "assistant"}}]})])
    with pytest.raises(UserError, match="choice 0 has no message content"):
        OpenAIProposer(config(fake_openai)).propose(ctx("p", 1)).answers


# ---------------------------------------------------------------- prices and budget


def test_price_table_knows_the_common_models():
    prices = load_prices()
    for model in ["gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "o3", "o4-mini", "gpt-5"]:
        assert prices[model].input > 0 and prices[model].output >= prices[model].input
    assert price_for("gpt-4o-2024-08-06") == prices["gpt-4o"]
    assert price_for("gpt-4o-mini-2024-07-18") == prices["gpt-4o-mini"]
    assert price_for("llama3:70b") is None


def test_budget_refuses_a_call_before_sending_it(fake_openai):
    fake_openai.script([reply()])
    # gpt-4o: 8192 tokens x 4 samples at $10/1M is $0.33 worst case, over a $0.10 budget.
    proposer = OpenAIProposer(config(fake_openai, max_tokens=8192), budget=Budget(limit_usd=0.10))
    proposal = proposer.propose(ctx("p", 4))
    assert proposal.answers == [] and "budget $0.10" in (proposal.stop or "")
    assert fake_openai.requests == []


def test_budget_worst_case_counts_prompt_and_completion_tokens(fake_openai):
    proposer = OpenAIProposer(config(fake_openai, max_tokens=1000))
    prompt = "x" * 4001  # 1001 tokens at chars/4, rounded up
    assert proposer.worst_case_usd(prompt, 3) == pytest.approx((1001 * 2.50 + 3000 * 10.00) / 1e6)


def test_budget_refuses_the_call_that_would_cross_it(fake_openai):
    usage = {"prompt_tokens": 100_000, "completion_tokens": 0}  # $0.25 per call on gpt-4o
    fake_openai.script([reply(usage=usage)] * 3)
    budget = Budget(limit_usd=0.60)
    proposer = OpenAIProposer(config(fake_openai, max_tokens=1), budget=budget)
    prompt = "x" * 160_000  # 40,000 tokens at chars/4: a $0.10 worst case
    proposer.propose(ctx(prompt, 1))
    proposer.propose(ctx(prompt, 1))
    stopped = proposer.propose(ctx(prompt, 1))  # $0.50 spent + up to $0.10 more crosses $0.60
    assert stopped.answers == [] and stopped.stop and "budget" in stopped.stop
    assert len(fake_openai.requests) == 2 and budget.spent_usd == pytest.approx(0.50)


def test_budget_with_an_unknown_price_refuses_to_start(fake_openai):
    with pytest.raises(UserError, match="no price known for model 'llama3:70b'"):
        OpenAIProposer(config(fake_openai, model="llama3:70b"), budget=Budget(limit_usd=1.0))
    priced = OpenAIProposer(config(fake_openai, model="llama3:70b", price=Price(input=0.1, output=0.2)),
                            budget=Budget(limit_usd=1.0))
    assert priced.price == Price(input=0.1, output=0.2)


def test_an_unknown_model_has_an_unknown_cost_not_a_zero_one(fake_openai):
    fake_openai.script([reply()])
    [answer] = OpenAIProposer(config(fake_openai, model="llama3:70b")).propose(ctx("p", 1)).answers
    assert answer.usage.completion_tokens > 0 and not answer.usage.priced
    assert (answer.usage + Usage(cost_usd=0.5)).priced is False  # a sum with an unknown part is not a known cost


def test_the_shipped_prices_are_openais_and_price_only_openais_endpoint(fake_openai):
    """The fake server answering as gpt-4o is not OpenAI: its tokens are not charged at OpenAI's price."""
    fake_openai.script([reply()])
    [answer] = OpenAIProposer(config(fake_openai, price=None)).propose(ctx("p", 1)).answers
    assert answer.usage.completion_tokens > 0 and not answer.usage.priced and answer.usage.cost_usd == 0
    at_openai = OpenAIProposer(OpenAIConfig(model="gpt-4o", base_url=None, api_key="sk-test"))
    assert at_openai.price == price_for("gpt-4o")


def test_budget_alone():
    budget = Budget(limit_usd=1.0)
    budget.check(1.0)  # exactly the limit is allowed
    budget.charge(Usage(cost_usd=0.75))
    assert budget.remaining_usd == pytest.approx(0.25)
    with pytest.raises(BudgetExceeded):
        budget.check(0.26)
    Budget().check(math.inf)  # no limit


# ---------------------------------------------------------------- the exchange log


def test_on_call_sees_every_exchange_including_failed_ones(fake_openai):
    fake_openai.script([rate_limited(0.01), slow(2.0), reply("a", max_choices=1), reply("b"), unauthorized()])
    seen: list[tuple[dict, str]] = []
    proposer = OpenAIProposer(config(fake_openai, timeout_s=0.2, max_retries=2),
                              on_call=lambda payload, body: seen.append((payload, body)))
    proposer.propose(ctx("p", 2)).answers
    with pytest.raises(UserError):
        proposer.propose(ctx("q", 1)).answers
    assert [payload["n"] for payload, _ in seen] == [2, 2, 2, 1, 1]
    assert [payload["messages"][-1]["content"] for payload, _ in seen] == ["p"] * 4 + ["q"]
    bodies = [json.loads(body) for _, body in seen]
    assert bodies[0]["error"]["code"] == "rate_limit_exceeded"
    assert bodies[1]["error"]["type"] == "agent_no_response"  # the timed-out attempt
    assert bodies[2]["choices"][0]["message"]["content"] == "a"
    assert bodies[3]["choices"][0]["message"]["content"] == "b"
    assert bodies[4]["error"]["code"] == "invalid_api_key"


def test_on_call_sees_a_malformed_body_as_received(fake_openai):
    fake_openai.script([malformed("not json at all")])
    seen: list[str] = []
    with pytest.raises(UserError):
        OpenAIProposer(config(fake_openai), on_call=lambda payload, body: seen.append(body)).propose(ctx("p", 1)).answers
    assert seen == ["not json at all"]


# ---------------------------------------------------------------- replay


def recorded(n: int) -> list[Answer]:
    return [Answer(text=f"answer {i}", model="gpt-4o", usage=Usage(prompt_tokens=i)) for i in range(n)]


def test_replay_serves_recorded_answers_in_order_k_per_call():
    replay = ReplayProposer(recorded(4))
    assert [a.text for a in replay.propose(ctx("ignored", 2)).answers] == ["answer 0", "answer 1"]
    assert [a.text for a in replay.propose(ctx("ignored", 2)).answers] == ["answer 2", "answer 3"]


def test_replay_running_out_says_how_many_were_recorded():
    replay = ReplayProposer(recorded(3))
    replay.propose(ctx("p", 2))
    assert [a.text for a in replay.propose(ctx("p", 2)).answers] == ["answer 2"]  # what is left of a killed run's last iteration
    spent = replay.propose(ctx("p", 2))
    assert spent.answers == [] and "the recorded run has 3" in (spent.stop or "")


def test_both_proposers_satisfy_the_protocol(fake_openai):
    assert isinstance(ReplayProposer([]), Proposer)
    assert isinstance(OpenAIProposer(config(fake_openai)), Proposer)

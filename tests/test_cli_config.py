"""The user's configuration through the real CLI: a TOML file ($AGENT_CONFIG) and AGENT_* variables set defaults,
the store and prices without editing the installed package; flags win; a bad value is one line naming its source;
a model without a known price has an unknown cost, never $0.
"""

from __future__ import annotations

import json

import pytest
from fake_openai import reply
from test_cli_run import CPU, NO_CODE, agent, json_events, ok

from agent.store import Store


def test_a_bad_config_is_one_line_naming_the_file_or_the_variable(tmp_path):
    bad = tmp_path / "config.toml"
    bad.write_text("[run]\nsamplez = 3\n")
    p = agent("runs", "--root", tmp_path, AGENT_CONFIG=str(bad))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert f"config {bad}: run.samplez: Extra inputs are not permitted" in p.stderr
    bad.write_text("[run\n")
    p = agent("runs", "--root", tmp_path, AGENT_CONFIG=str(bad))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and str(bad) in p.stderr
    p = agent("runs", "--root", tmp_path, AGENT_RUN__SAMPLES="many")
    assert p.returncode == 2 and "environment: AGENT_RUN__SAMPLES: Input should be a valid integer" in p.stderr
    p = agent("runs", "--root", tmp_path, AGENT_CONFIG=str(tmp_path / "missing.toml"))
    assert p.returncode == 2 and "no such file (AGENT_CONFIG)" in p.stderr


@pytest.mark.slow  # evaluates the starting kernel
def test_the_file_sets_defaults_the_environment_overrides_it_and_a_flag_wins(tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    config = tmp_path / "config.toml"
    config.write_text(f'[run]\nllm = "offline"\niterations = 0\nseed = 7\npatience = 2\ndevice = "cpu"\n'
                      f'gpu = "h100"\n\n[store]\nroot = "{root}"\n')
    ok(agent("run", "--patience", 5, "--quiet", AGENT_CONFIG=str(config), AGENT_RUN__SEED="9"))
    with Store(root) as store:  # the configured store, not the working directory
        [record] = store.list_runs()
    c = record.config
    assert (c.llm, c.iterations, c.seed, c.patience, c.device, c.gpu) == ("offline", 0, 9, 5, "cpu", "h100")
    listed = json.loads(ok(agent("runs", "--json", AGENT_CONFIG=str(config))).stdout)
    assert [r["id"] for r in listed] == [record.id]
    shown = json.loads(ok(agent("config", "--json", AGENT_CONFIG=str(config), AGENT_RUN__SEED="9")).stdout)
    assert shown["file"] == str(config) and shown["environment"] == ["AGENT_RUN__SEED"]
    assert shown["settings"]["run"]["seed"] == 9 and shown["settings"]["run"]["patience"] == 2


@pytest.mark.slow  # evaluates the starting kernel
def test_a_local_models_cost_is_unknown_unless_the_config_prices_it(fake_openai, tmp_path):
    """Before: the fake server's gpt-4o answers were charged at OpenAI's gpt-4o price."""
    fake_openai.script([reply(NO_CODE), reply(NO_CODE)])
    args = ("run", *CPU, "--llm", "openai", "--iterations", 1, "--samples", 1, "--json")
    _, unpriced = json_events(agent(*args, "--root", tmp_path / "a", server=fake_openai))
    assert unpriced["usage"]["prompt_tokens"] > 0
    assert unpriced["usage"]["priced"] is False and unpriced["usage"]["cost_usd"] == 0
    table = ok(agent("runs", "--root", tmp_path / "a")).stdout
    assert "unknown" in table and "$0" not in table
    refused = agent(*args, "--budget-usd", 1, "--root", tmp_path / "b", server=fake_openai)
    assert refused.returncode == 2 and "no price known for model 'gpt-4o'" in refused.stderr
    assert '[prices."' in refused.stderr  # the hint keeps its brackets: before, rich ate them as markup
    config = tmp_path / "config.toml"
    config.write_text(f'[prices."gpt-4o"]\ninput = 100.0\noutput = 100.0\nbase_url = "{fake_openai.base_url}"\n')
    _, priced = json_events(agent(*args, "--budget-usd", 50, "--root", tmp_path / "c", server=fake_openai,
                                  AGENT_CONFIG=str(config)))
    u = priced["usage"]
    assert u["priced"] is True
    assert u["cost_usd"] == pytest.approx((u["prompt_tokens"] + u["completion_tokens"]) * 100.0 / 1e6)


def test_config_prints_every_setting_in_effect_with_where_it_came_from(tmp_path):
    """Before: the file's path, the variables' names and `{}` (only what differed from the defaults, no source)."""
    config = tmp_path / "config.toml"
    config.write_text('[run]\nsamples = 3\nllm = "offline"\n\n[prices."local-model"]\ninput = 0.5\noutput = 1.5\n')
    p = ok(agent("config", AGENT_CONFIG=str(config), AGENT_RUN__SAMPLES="5", AGENT_PROGRESS__HEARTBEAT_S="10"))
    rows = {}
    for line in p.stdout.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) == 5 and cells[1]:
            rows[cells[1]] = (cells[2], cells[3])
    assert rows["run.samples"] == ("5", "AGENT_RUN__SAMPLES")  # the variable wins over the file
    assert rows["run.llm"] == ("offline", f"config {config}")
    assert rows["progress.heartbeat_s"] == ("10.0", "AGENT_PROGRESS__HEARTBEAT_S")
    assert rows["run.model"][1] == "default" and rows["store.root"][1] == "default"
    assert rows['prices."local-model"'][1] == f"config {config}"
    assert "{}" not in p.stdout and "store: " in p.stdout
    shown = json.loads(ok(agent("config", "--json", "--root", tmp_path, AGENT_CONFIG=str(config))).stdout)
    by_key = {e["key"]: e for e in shown["effective"]}
    assert by_key["run.llm"] == {"key": "run.llm", "value": "offline", "source": f"config {config}"}
    assert by_key["run.seed"]["source"] == "default" and by_key["progress.heartbeat_s"]["value"] == 60.0
    assert shown["store"]["source"] == "--root" and shown["store"]["root"] == str(tmp_path.resolve())

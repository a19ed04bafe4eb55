"""agent.config: where the user's configuration is read from, what wins, and one line for anything wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.config import UserConfig, config_path, load_user_config
from agent.errors import UserError


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    import os

    for key in [k for k in os.environ if k.startswith("AGENT_")]:
        monkeypatch.delenv(key)


def test_the_file_is_agent_config_else_the_xdg_place(tmp_path):
    assert config_path({"AGENT_CONFIG": "/x/c.toml"}) == Path("/x/c.toml")
    assert config_path({"XDG_CONFIG_HOME": str(tmp_path)}) == tmp_path / "agent" / "config.toml"


def test_no_file_means_the_built_in_defaults(tmp_path):
    c = load_user_config(tmp_path / "none.toml")
    assert c == UserConfig() and c.progress.heartbeat_s == 60.0 and c.run.samples is None


def test_the_environment_wins_over_the_file_key_by_key(tmp_path, monkeypatch):
    f = tmp_path / "c.toml"
    f.write_text("[run]\nsamples = 2\nseed = 1\n[progress]\nheartbeat_s = 5\n")
    monkeypatch.setenv("AGENT_RUN__SEED", "3")
    c = load_user_config(f)
    assert (c.run.samples, c.run.seed, c.progress.heartbeat_s) == (2, 3, 5.0)


def test_values_are_validated(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("[run]\nsamples = 0\n")
    with pytest.raises(UserError, match=r"run\.samples: Input should be greater than or equal to 1"):
        load_user_config(f)
    f.write_text('[run]\nobjective = "wall"\n')
    with pytest.raises(UserError, match=r"run\.objective"):
        load_user_config(f)


def test_a_price_bound_to_an_endpoint_prices_only_that_endpoint(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('[prices."llama"]\ninput = 1\noutput = 2\nbase_url = "http://127.0.0.1:8000/v1/"\n'
                 '[prices."anywhere"]\ninput = 3\noutput = 4\n')
    c = load_user_config(f)
    assert c.price("llama", "http://127.0.0.1:8000/v1") is not None
    assert c.price("llama", "https://api.openai.com/v1") is None
    assert c.price("anywhere", "https://x/v1") is not None and c.price("other", "https://x/v1") is None

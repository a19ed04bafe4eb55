"""agent/runconfig.py: a run's parameters are declared once, on RunConfig; `agent run`'s options, the config file's
[run] section (and so `agent config`), the checks of a value and a resume's refusals are derived from it."""

from __future__ import annotations

import argparse
import math
from typing import Annotated

import pytest
from pydantic import Field, ValidationError

from agent.cli import build_parser
from agent.commands.run import add_run_flags
from agent.config import RunDefaults, UserConfig, run_defaults_model
from agent.errors import UserError
from agent.runconfig import DEFAULT_PROBLEM, DEFAULT_STAGE, Flag, RunConfig, flag_values, new_config, resumed, run_flags


class Wider(RunConfig):
    """RunConfig with one parameter more: what adding a run flag takes (one field)."""

    warmup: Annotated[int, Flag("warm-up calls before timing (default: 2)", metavar="N", resumable=True)] = Field(
        default=2, ge=0)
    layout: Annotated[str, Flag("memory layout of the inputs (default: nchw)")] = "nchw"


def run_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["run"]


def test_every_run_parameter_is_a_flag_of_agent_run_and_a_key_of_the_config_file():
    options = {o: a for a in run_parser()._actions for o in a.option_strings}
    flags = run_flags()
    assert [f.field for f in flags] == [name for name in RunConfig.model_fields if name != "root"]
    for f in flags:
        action = options[f.option]
        assert (action.help, action.default, action.type) == (f.flag.help, None, f.kind), f.option
        assert action.choices == (list(f.choices) if isinstance(action.choices, list) else f.choices), f.option
    assert list(RunDefaults.model_fields) == [f.name for f in flags]
    assert UserConfig().run.model_dump() == {f.name: None for f in flags}  # `agent config`: every key, unset


def test_a_new_run_flag_is_one_field_and_the_parser_the_config_and_the_checks_follow():
    parser = argparse.ArgumentParser()
    add_run_flags(parser, Wider)
    assert parser.parse_args(["--warmup", "5"]).warmup == 5
    assert "warm-up calls before timing (default: 2)" in parser.format_help()

    section = run_defaults_model(Wider)
    assert section.model_validate({"warmup": 3}).model_dump()["warmup"] == 3
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        section.model_validate({"warmup": -1})

    values = flag_values({}, {}, Wider)
    assert values["warmup"] == 2 and new_config(values, Wider, device="cpu").warmup == 2
    assert flag_values({}, {"warmup": 4}, Wider)["warmup"] == 4  # the user's config under the built-in default
    with pytest.raises(UserError, match="--warmup must be ≥ 0, got -1"):
        flag_values({"warmup": -1}, {}, Wider)

    run = new_config(flag_values({}, {}, Wider), Wider, device="cpu")
    assert resumed(run, {"warmup": 7}, "r1").warmup == 7  # resumable: a resume may change it
    with pytest.raises(UserError, match="--layout nhwc: run r1 was started with nchw and a resumed run keeps it"):
        resumed(run, {"layout": "nhwc"}, "r1")


def test_a_flag_wins_over_the_users_config_which_wins_over_the_built_in_default():
    values = flag_values({"samples": 2}, {"samples": 8, "iterations": 9})
    assert (values["samples"], values["iterations"], values["patience"]) == (2, 9, 3)
    assert (values["stage"], values["problem"]) == (DEFAULT_STAGE, DEFAULT_PROBLEM)
    # decided when the run starts: the key, the GPU
    assert values["llm"] is None and values["device"] is None
    assert flag_values({"samples": 2}, None)["iterations"] is None  # resuming: only what was given


def test_a_new_run_takes_the_new_defaults_and_an_old_record_reads_as_it_was_recorded():
    config = new_config(flag_values({}, {}), device="cpu", llm="offline")
    assert (config.diagnosis, config.memory, config.search, config.energy) == (True, True, "beam", False)
    old = RunConfig.model_validate({"problem": "gap44", "stage": "memory-fusion", "device": "cpu"})
    assert (old.diagnosis, old.memory, old.search) == (False, False, "greedy")  # runs from before those flags
    assert old.energy  # and measured every candidate's energy


@pytest.mark.parametrize(("given", "message"), [
    ({"iterations": -1}, "--iterations must be ≥ 0, got -1"),
    ({"samples": 0}, "--samples must be ≥ 1, got 0"),
    ({"samples": 300}, "--samples 300: at most 256 candidates per iteration"),
    ({"beam": 65}, "--beam 65: at most 64 parents"),
    ({"timeout": 0.0}, "--timeout must be > 0 seconds, got 0"),
    ({"llm_timeout": -1.0}, "--llm-timeout must be > 0 seconds, got -1"),
    ({"budget_usd": 0.0}, "--budget-usd must be > 0, got 0"),
    ({"max_minutes": math.nan}, "--max-minutes must be > 0, got nan"),
    ({"patience": 0}, "--patience must be ≥ 1, got 0"),
])
def test_a_value_outside_its_fields_bounds_is_one_line_naming_the_flag(given, message):
    with pytest.raises(UserError) as e:
        flag_values(given, {})
    assert e.value.message == message
    with pytest.raises(UserError):  # and on resuming too
        flag_values(given, None)


def test_a_resume_keeps_what_the_run_measures_and_takes_what_may_change():
    run = new_config(flag_values({}, {}), device="cpu", llm="offline")
    more = resumed(run, flag_values({"iterations": 9, "samples": 2, "timeout": 30.0, "diagnosis": "on"}, None), "r")
    assert (more.iterations, more.samples, more.timeout_s, more.diagnosis) == (9, 2, 30.0, True)  # on: as it was
    for flag, value, had in [("stage", "algebraic", DEFAULT_STAGE), ("diagnosis", "off", "on"), ("seed", 1, 0),
                             ("search", "tree", "beam")]:
        with pytest.raises(UserError, match=f"--{flag} {value}: run r was started with {had} and a resumed run keeps"):
            resumed(run, {flag: value}, "r")

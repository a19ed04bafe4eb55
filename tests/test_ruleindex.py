"""agent.ruleindex and agent/data/rules.toml: every rule a verdict can name is in the index, and the index leads to
the code that decides it (`agent rules`, and `agent show` under a refusal's message)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from agent.ruleindex import get_rule, rules, rules_named
from agent.errors import UserError

ROOT = Path(__file__).resolve().parents[1]


def test_each_rule_names_a_file_that_spells_its_id():
    for r in rules().values():
        where = [ROOT / r.file, *([ROOT / r.data] if r.data else [])]
        assert all(p.is_file() for p in where), r
        assert any(f'"{r.id}"' in p.read_text() or f"[{r.id}]" in p.read_text() for p in where), r.id


def _static_ids() -> set[str]:
    """The ids the static room can raise: a Violation's rule given in code, and the rules policy.toml names."""
    found = set()
    for p in (ROOT / "agent" / "harness" / "static").glob("*.py"):
        text = p.read_text()
        found |= set(re.findall(r'\.add\([^,()]*(?:\([^()]*\))?[^,()]*, "([a-z-]+)"', text))
        found |= set(re.findall(r'rule="([a-z-]+)"', text))
        found |= set(re.findall(r'"[a-z_]+": "([a-z-]+)"', text)) & {"import", "monkeypatch", "exec", "file"}
        found |= set(re.findall(r'\.get\(name, "([a-z-]+)"\)', text))
    policy = tomllib.loads((ROOT / "agent" / "data" / "policy.toml").read_text())
    for section in ("forbidden", "forbidden_attributes"):
        found |= set(policy.get(section, {}).values())
    return found


def _tagged_ids() -> set[str]:
    """The ids the parent's judging and the loop write at the end of a message: "... [id]")."""
    found = set()
    for p in [*(ROOT / "agent" / "harness" / "judge").glob("*.py"), ROOT / "agent" / "harness" / "pipeline.py",
              ROOT / "agent" / "crosscheck.py"]:
        found |= set(re.findall(r'\[([a-z][a-z-]+)\]"', p.read_text()))
    return found


def test_every_id_a_verdict_can_carry_is_in_the_index():
    static, tagged = _static_ids(), _tagged_ids()
    assert {"escape", "import", "no-kernel", "stage-store-then-load", "clock", "stream"} <= static  # the scan works
    assert {"work-share", "kernels-did-the-work", "constant-factor", "every-call", "tampering"} <= tagged
    assert static | tagged <= set(rules()), sorted((static | tagged) - set(rules()))


def test_every_manifest_case_names_an_indexed_rule():
    manifest = tomllib.loads((ROOT / "tests" / "candidates" / "manifest.toml").read_text())
    named = {c["rule"] for c in manifest.values() if "rule" in c}
    assert "work-share" in named and named <= set(rules()), sorted(named - set(rules()))


def test_a_message_leads_to_its_rules_once_each_and_unknown_brackets_are_not_rules():
    message = ("line 3: `open` reads files [file]; line 9: `open` again [file]; PyTorch computed over 2 MB ... "
               "[work-share] (see [1])")
    assert [r.id for r in rules_named(message)] == ["file", "work-share"]
    assert get_rule("work-share").file == "agent/harness/judge/rules.py"
    with pytest.raises(UserError, match="no rule 'nope'"):
        get_rule("nope")


def test_agent_rules_lists_them_shows_one_and_refuses_an_unknown_id_in_one_line(capsys):
    from agent.cli import main

    assert main(["rules", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in listed] == list(rules())
    assert main(["rules", "kernels-did-the-work"]) == 0
    out = capsys.readouterr().out
    assert "file: agent/harness/judge/verdict.py" in out and "destroyed" in out
    with pytest.raises(SystemExit) as e:
        main(["rules", "nope"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") <= 1 and "no rule 'nope'" in err and "Traceback" not in err


def test_a_refusal_shown_by_agent_eval_and_agent_show_names_where_its_rule_lives():
    from rich.console import Console

    from agent.schema import EvalResult, Verdict
    from agent.view.runs import eval_view

    def shown(verdict: Verdict, message: str) -> str:
        out = Console(width=200, record=True, file=open("/dev/null", "w"))
        out.print(eval_view(EvalResult(verdict=verdict, message=message), "gap44", "memory-fusion"))
        return out.export_text()

    text = shown(Verdict.RULE_VIOLATION, "PyTorch computed over 960.00 MB of this forward [work-share]")
    assert "rule work-share  agent/harness/judge/rules.py  (agent/data/operators.toml)" in text
    assert "rule " not in shown(Verdict.CORRECT, "correct on 7 trials [work-share]").split("message")[-1]

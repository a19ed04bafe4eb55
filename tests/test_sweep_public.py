"""The public-answer sweep (bench/suite/sweep_public.py, sweep_tables.py, sweep_review.py): reading a sweep folder, the
sample, the rule tags of a verdict's message, the hand review's judgements, the static-only pass through the real
policy, and the CLI path's per-answer limit and its one-line errors. The answers here are written for the test: the
fetched public ones stay out of the repository."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench" / "suite"))

import sweep_public as S  # noqa: E402
import sweep_review as R  # noqa: E402
import sweep_tables as T  # noqa: E402

PROBLEM = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)

batch_size = 16
dim = 1024

def get_inputs():
    return [torch.randn(batch_size, dim)]

def get_init_inputs():
    return []
'''

HONEST = '''import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=offs < n)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.empty(4, 4))
        INIT

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
'''


def _sweep(root: Path, answers: dict[str, str], source: str = "mine", problem: str = PROBLEM) -> Path:
    (root / source / "answers").mkdir(parents=True)
    (root / source / "problems").mkdir()
    entries = {}
    for name, code in answers.items():
        (root / source / "answers" / f"{name}.py").write_text(code)
        (root / source / "problems" / f"{name}.py").write_text(problem)
        entries[f"answers/{name}.py"] = {"problem": f"problems/{name}.py", "origin": "written here", "model": None}
    (root / source / "answers.json").write_text(json.dumps({"source": source, "repo": "here", "commit": "0" * 40,
                                                            "problems": "here", "answers": entries}))
    return root


def test_rule_tags_are_read_per_violation_and_static_is_told_from_run_time():
    msg = ("line 3: `torch.nn.init._calculate_fan_in_and_fan_out` is private to torch: use the public API [escape]; "
           "line 9: import of `numpy` is not allowed (a kernel module may import: torch; triton) [import] (+2 more)")
    vs = S.violations_of(msg)
    assert [(v["rule"], v["kind"]) for v in vs] == [("escape", "static"), ("import", "static")]
    run_time = S.violations_of("the tensor forward returned (size cpu) was never given to a Triton kernel [run-time]")
    assert [(v["rule"], v["kind"]) for v in run_time] == [("run-time", "run-time")]


def test_sample_spreads_over_sources_and_is_repeatable():
    answers = [{"source": s, "answer": f"{s}{i}"} for s in "ab" for i in range(10)] + [{"source": "c", "answer": "c0"}]
    picked = S.sample(answers, 7, seed=1)
    assert len(picked) == 7 and {a["source"] for a in picked} == {"a", "b", "c"}
    assert [a["answer"] for a in S.sample(answers, 7, seed=1)] == [a["answer"] for a in picked]


def test_an_answer_is_refused_falsely_only_when_every_refusal_is_false():
    private = {"rule": "escape", "kind": "static", "message": "line 3: `torch.nn.init._calculate_fan_in_and_fan_out` "
               "is private to torch: use the public API [escape]"}
    address = {"rule": "escape", "kind": "static", "message": "line 9: a tensor's address may be read only for its "
               "alignment (`x.data_ptr() % 16`) [escape]"}
    new = {"rule": "escape", "kind": "static", "message": "line 4: something no one has read [escape]"}
    assert R.answer_judgement({"violations": [private]}) == "false"
    assert R.answer_judgement({"violations": [private, address]}) == "defensible"
    assert R.answer_judgement({"violations": [private, new]}) == "unreviewed"
    assert R.answer_judgement({"violations": [{"rule": "run-time", "kind": "run-time", "message": "x"}]}) is None


def test_static_only_judges_every_answer_with_the_real_policy(tmp_path, capsys):
    cuda_only = HONEST.replace("INIT", "pass").replace("x = x.contiguous()", "assert x.is_cuda")
    sweep = _sweep(tmp_path, {"honest": HONEST.replace("INIT", "nn.init.kaiming_uniform_(self.w)"),
                              "cuda_only": cuda_only,
                              "private_init": HONEST.replace("INIT", "nn.init._calculate_fan_in_and_fan_out(self.w)"),
                              "private_c": HONEST.replace("INIT", "torch._C._set_grad_enabled(False)"),
                              "no_model": "import torch\n"})
    assert S.main([str(sweep), "--static-only", "--review"]) == 0
    results = {Path(r["answer"]).stem: r for r in json.loads((sweep / "results-static.json").read_text())["results"]}
    assert results["honest"]["verdict"] == "passes-static" and results["honest"]["cpu_sizes"] == "reduced"
    assert results["cuda_only"]["device_branch"] and not results["honest"]["device_branch"]
    assert results["no_model"]["verdict"] == "no_code"
    # nn.Linear's own init helper is allowed by its listed path (issue 34): the idiom of 11 % of real answers
    assert results["private_init"]["verdict"] == "passes-static"
    refused = results["private_c"]
    assert refused["verdict"] == "rule_violation" and [v["rule"] for v in refused["violations"]] == ["escape"]
    assert "torch._C" in refused["violations"][0]["line"]
    out = capsys.readouterr().out
    assert "| mine | 5 |" in out
    assert "mine/answers/private_c.py [static escape] line 16: `torch._C` is private to torch" in out


def test_a_problem_without_size_globals_is_told_to_run_at_its_own_sizes(tmp_path):
    inline = PROBLEM.replace("torch.randn(batch_size, dim)", "torch.randn(16, 1024)").replace("batch_size = 16\n", "")
    sweep = _sweep(tmp_path, {"fixed": HONEST.replace("INIT", "pass")}, problem=inline.replace("dim = 1024\n", ""))
    sweep = _sweep(tmp_path / "b", {"broken": HONEST.replace("INIT", "pass")}, problem="import no_such_module\n")
    assert S.main([str(tmp_path), "--static-only"]) == 0 and S.main([str(sweep), "--static-only"]) == 0
    (fixed,) = json.loads((tmp_path / "results-static.json").read_text())["results"]
    (broken,) = json.loads((sweep / "results-static.json").read_text())["results"]
    assert fixed["cpu_sizes"] == "own sizes"
    assert broken["cpu_sizes"].startswith("load error:") and "no_such_module" in broken["cpu_sizes"]


def test_tables_count_answers_per_rule_and_source():
    results = [{"source": "a", "answer": "1", "verdict": "rule_violation",
                "violations": [{"rule": "escape", "kind": "static", "message": "m"},
                               {"rule": "escape", "kind": "static", "message": "n"}]},
               {"source": "b", "answer": "2", "verdict": "correct"}]
    table = T.refusal_table(results)
    assert "| escape | 1 | 0 | 1 |" in table and "| answers refused | 1 of 1 | 0 of 1 | 1 of 2 |" in table
    assert "| all | 2 | 1 | 1 |" in T.verdict_table(results)


def test_an_answer_past_its_limit_is_killed_with_its_process_group(tmp_path):
    sweep = _sweep(tmp_path, {"honest": HONEST.replace("INIT", "pass")})
    assert S.main([str(sweep), "--timeout", "0.5", "--out", str(tmp_path / "r.json")]) == 0
    (r,) = json.loads((tmp_path / "r.json").read_text())["results"]
    assert r["verdict"] == "sweep-timeout" and r["seconds"] < 30


def test_a_problem_the_cli_refuses_is_a_one_line_cli_error(tmp_path):
    sweep = _sweep(tmp_path, {"honest": HONEST.replace("INIT", "pass")}, problem="x = 1\n")
    assert S.main([str(sweep), "--out", str(tmp_path / "r.json")]) == 0
    (r,) = json.loads((tmp_path / "r.json").read_text())["results"]
    assert r["verdict"] == "cli-error" and "not a KernelBench-style problem" in r["message"]
    assert "\n" not in r["message"]


@pytest.mark.parametrize("args", [["--jobs", "0"], ["--timeout", "-1"]])
def test_bad_options_are_one_line_errors(tmp_path, args):
    with pytest.raises(SystemExit) as e:
        S.main([str(tmp_path), *args])
    assert e.value.code == 2


def test_a_budget_stops_the_sweep_and_leaves_the_rest_for_resume(tmp_path, capsys):
    sweep = _sweep(tmp_path, {"a": HONEST.replace("INIT", "pass"), "b": HONEST.replace("INIT", "pass")})
    out = tmp_path / "r.json"
    assert S.main([str(sweep), "--budget-s", "1", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["results"] == []  # the one in flight was killed, not recorded
    assert "--resume goes on" in capsys.readouterr().err

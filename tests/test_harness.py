"""agent.harness end to end in CPU mode: the adversarial suite (tests/candidates/manifest.toml), the seed's
starting kernel, what checks and timing report, the worker's profile mode, and `agent eval`.

One evaluate_many call runs the whole suite (one shared reference, candidates in parallel), then each test
reads its verdict; the seed kernel is evaluated afterwards, in the same process, as the health check.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from agent.harness import EvalRequest, evaluate, evaluate_many
from agent.harness.job import prepare_job, read_result, worker_argv, worker_env
from agent.harness.wall.sandbox import run_sandboxed
from agent.problems import load_problem, starting_code
from agent.schema import EvalResult, Verdict

CANDIDATES = Path(__file__).parent / "candidates"
MANIFEST = tomllib.loads((CANDIDATES / "manifest.toml").read_text())
from agent.stages import get_stage  # noqa: E402

STAGE = get_stage("memory-fusion")
REPO = Path(__file__).resolve().parent.parent


def request(source: str, problem: str = "gap44", stage: str = "memory-fusion", **kw) -> EvalRequest:
    """`problem`: a name, or a problem file's path under tests/candidates (a manifest's own problems)."""
    kw.setdefault("time_it", False)
    where = str(CANDIDATES / problem) if problem.endswith(".py") else problem
    return EvalRequest(source=source, problem=load_problem(where), stage=get_stage(stage), device="cpu", **kw)


def answer(case: dict) -> str:
    """The candidate's text as a model would send it (`transform`: how it reaches us)."""
    text = (CANDIDATES / case["file"]).read_text()
    return text.replace("\n", "\r\n") if case.get("transform") == "crlf" else text


@pytest.fixture(scope="session")
def suite() -> dict[str, EvalResult]:
    reqs = [request(answer(case), problem=case.get("problem", "gap44"), stage=case.get("stage", "memory-fusion"),
                    timeout_s=case.get("timeout_s", 120), time_it=name == "several_blocks" or case.get("time", False))
            for name, case in MANIFEST.items()]
    return dict(zip(MANIFEST, evaluate_many(reqs)))


# The manifest's size, pinned: an answer dropped from it (or added without a verdict) is noticed here.
MANIFEST_ANSWERS = 261
NOT_IN_MANIFEST: set[str] = set()  # correct.py, the answer many tests share, is a case too (bench/checks judges it)
# what a case may say: a misspelt key (a `gpu_mesage`) would be a check silently not made
CASE_KEYS = {"file", "verdict", "threat", "rule", "message", "timeout_s", "problem", "stage", "time", "transform",
             "gpu_verdict", "gpu_message", "also"}


def test_every_threat_has_a_candidate_file_and_a_valid_verdict():
    assert len(MANIFEST) == MANIFEST_ANSWERS
    for name, case in MANIFEST.items():
        assert (CANDIDATES / case["file"]).is_file(), name
        Verdict(case["verdict"])
        Verdict(case.get("gpu_verdict", case["verdict"]))  # bench/checks/manifest_verdicts.py: where a GPU differs
        assert case["verdict"] != "needs_gpu" or "gpu_verdict" in case, f"{name}: what does a GPU judge it?"
        assert set(case) <= CASE_KEYS, f"{name}: {set(case) - CASE_KEYS}"
    answers = {p.name for p in CANDIDATES.iterdir() if p.is_file() and p.suffix in (".py", ".md", ".txt")}
    assert answers - {c["file"] for c in MANIFEST.values()} == NOT_IN_MANIFEST


@pytest.mark.slow
@pytest.mark.timeout(2400)  # the first one waits for the whole suite (one evaluate_many, in parallel; 261 answers)
@pytest.mark.parametrize("name", list(MANIFEST))
def test_adversarial_candidate_gets_the_right_verdict(suite, name):
    case, result = MANIFEST[name], suite[name]
    # `also`: a refusal the draw decides between (where the secret ablated call falls among the trials)
    assert result.verdict in [case["verdict"], *case.get("also", [])], \
        f"{name} ({case['threat']}): {result.verdict}: {result.message}"
    if result.verdict != case["verdict"]:
        return
    if "rule" in case:
        assert f"[{case['rule']}]" in result.message
    if "message" in case:
        assert case["message"] in result.message
    assert result.message and len(result.message.splitlines()) <= 3


@pytest.mark.slow
def test_seed_starting_kernel_is_correct_after_the_hostile_suite(suite):
    result = evaluate(request(starting_code(load_problem("gap44"))))
    assert result.verdict == Verdict.CORRECT, result.message
    assert result.kernels == ["fused_multiply_gap_kernel_optimized", "fused_multiply_gap_kernel_small"]


@pytest.mark.slow
def test_checks_cover_every_size_distribution_and_buffer_reuse(suite):
    checks = suite["several_blocks"].checks
    problem = load_problem("gap44")
    assert {c.size for c in checks} == {s.label for s in problem.cpu_sizes}
    # every default draw at every size, and one wide draw (values far past N(0, 1)) at the first
    assert {c.distribution for c in checks} == {"problem", "randn", "offset", "randn*100"}
    assert [c.size for c in checks if c.distribution == "randn*100"] == [problem.cpu_sizes[0].label]
    assert {c.note for c in checks} == {"fresh", "same buffer, new values", "new buffer, same shape"}
    for c in checks:
        assert c.passed and c.error is not None and c.eager_error is not None
        at_size = max(d.eager_error or 0.0 for d in checks if d.size == c.size)  # the problem's, not one draw's
        assert c.tolerance == max(1e-4, 4 * at_size)
        assert c.error <= c.tolerance


@pytest.mark.slow
def test_cpu_timing_is_marked_not_meaningful(suite):
    timing = suite["several_blocks"].timing
    assert timing is not None and not timing.meaningful and timing.candidate_ms > 0
    assert timing.compile_ms is None


@pytest.mark.slow
def test_incorrect_verdict_reports_the_worst_case(suite):
    result = suite["wrong_scale"]
    assert "relative error" in result.message and "tolerance" in result.message
    failed = [c for c in result.checks if not c.passed]
    assert failed and all(c.error > c.tolerance for c in failed)


@pytest.mark.slow
def test_runtime_errors_point_at_the_candidates_line(suite):
    assert "candidate line 14" in suite["oob_crash"].message  # the unmasked tl.load
    assert "candidate line 25" in suite["compile_error"].message


@pytest.mark.slow
def test_every_autotune_config_is_validated(suite):
    checks = suite["autotune_bad_config"].checks
    by_config: dict[str, list[bool]] = {c.note.rsplit("config ", 1)[-1]: [] for c in checks}
    past = {c.note.rsplit("config ", 1)[-1]: c.passed for c in checks if "past-tile" in c.size}
    for c in checks:
        if "past-tile" not in c.size:
            by_config[c.note.rsplit("config ", 1)[-1]].append(c.passed)
    assert set(by_config) == {"0", "1"}
    assert all(by_config["0"]) and not all(by_config["1"])  # BLOCK=8192 covers every row here, BLOCK=256 does not
    assert past == {"0": False, "1": False}  # the trial just past its widest tile (8192) catches config 0 too


def test_static_verdicts_cost_no_process():
    result = evaluate(request((CANDIDATES / "pure_pytorch.py").read_text()))
    assert result.verdict == Verdict.RULE_VIOLATION and result.duration_s < 1
    assert result.code is not None and result.checks == []


def test_only_what_a_neighbour_on_the_gpu_can_cause_is_evaluated_again():
    from agent.harness.pipeline import neighbours_fault

    def result(verdict: Verdict, message: str) -> EvalResult:
        return EvalResult(verdict=verdict, message=message, device="cuda")

    assert neighbours_fault(result(Verdict.TIMEOUT, "no result within 45 s while waiting for the GPU (the limit ...)"))
    assert neighbours_fault(result(Verdict.RUNTIME_ERROR, "running forward: torch.OutOfMemoryError: CUDA out of memory."))
    assert not neighbours_fault(result(Verdict.TIMEOUT, "no result within 45 s while running forward (the limit ...)"))
    assert not neighbours_fault(result(Verdict.INCORRECT, "out of memory"))  # only a crash can be a neighbour's
    assert not neighbours_fault(result(Verdict.CORRECT, ""))
    assert not neighbours_fault(None)


def test_a_worker_started_before_its_job_evaluates_the_answer_it_is_given_later():
    from agent.harness import prewarm_for

    req = request(starting_code(load_problem("gap44")) or "")
    warm = prewarm_for(req, "cpu")
    result = evaluate(req, warm=warm)
    assert result.verdict == Verdict.CORRECT, result.message
    assert not warm.workdir.exists()  # used, then cleaned up like any worker's


def test_an_early_worker_whose_answer_fails_the_checks_is_ended_unused():
    from agent.harness import prewarm_for

    req = request((CANDIDATES / "pure_pytorch.py").read_text())
    warm = prewarm_for(req, "cpu")
    result = evaluate(req, warm=warm)
    assert result.verdict == Verdict.RULE_VIOLATION
    assert not warm._thread.is_alive() and not warm.workdir.exists()


def test_an_early_worker_started_for_another_device_is_not_used():
    from agent.harness import prewarm_for

    req = request(starting_code(load_problem("gap44")) or "")
    warm = prewarm_for(req.model_copy(update={"hide": [REPO / "candidates"]}), "cpu")  # a different wall
    assert not warm.fits("cpu", [], None) and warm.fits("cpu", [REPO / "candidates"], None)
    result = evaluate(req, warm=warm)
    assert result.verdict == Verdict.CORRECT and not warm._thread.is_alive()


def test_cudnn_benchmark_is_off_in_forward_and_refused_when_forward_sets_it():
    """`torch.backends.cudnn.benchmark = True` at import or in __init__ is allowed, and undone before forward runs
    (calls are judged and timed under the defaults, as the baseline's are); set by forward, it is still set when the
    flags are compared afterwards."""
    code = (CANDIDATES / "correct.py").read_text().replace("import triton\n", "import triton\n\ntorch.backends.cudnn.benchmark = True\n", 1)
    init = code.replace("        super().__init__()\n", "        super().__init__()\n        torch.backends.cudnn.benchmark = True\n", 1)
    checked = init.replace("    def forward(self, x):\n", "    def forward(self, x):\n        if torch.backends.cudnn.benchmark:\n"
                           "            raise RuntimeError('cudnn.benchmark is on in forward')\n", 1)
    in_forward = code.replace("    def forward(self, x):\n", "    def forward(self, x):\n        torch.backends.cudnn.benchmark = True\n", 1)
    assert checked.count("benchmark = True") == 2 and in_forward.count("benchmark = True") == 2
    allowed, refused = evaluate_many([request(checked), request(in_forward)])
    assert allowed.verdict == Verdict.CORRECT, allowed.message
    assert refused.verdict == Verdict.RULE_VIOLATION and "cudnn.benchmark: False -> True" in refused.message


def test_tf32_off_at_import_is_undone_and_refused_when_forward_sets_it():
    """TF32 turned off and cuDNN made deterministic at import (and the default matmul precision named) are put back
    before forward runs: the calls are judged and timed under the defaults, as the baseline's are; set by forward,
    the flag is still off when the flags are compared."""
    flags = ("torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False\n"
             "torch.backends.cudnn.deterministic = True\ntorch.set_float32_matmul_precision(\"highest\")\n")
    code = (CANDIDATES / "correct.py").read_text().replace("import triton\n", "import triton\n\n" + flags, 1)
    checked = code.replace("    def forward(self, x):\n", "    def forward(self, x):\n"
                           "        if not torch.backends.cudnn.allow_tf32 or torch.backends.cudnn.deterministic:\n"
                           "            raise RuntimeError('the flags set at import are still set in forward')\n", 1)
    in_forward = code.replace("    def forward(self, x):\n", "    def forward(self, x):\n"
                              "        torch.backends.cudnn.allow_tf32 = False\n", 1)
    assert checked != code != in_forward
    allowed, refused = evaluate_many([request(checked), request(in_forward)])
    assert allowed.verdict == Verdict.CORRECT, allowed.message
    assert refused.verdict == Verdict.RULE_VIOLATION and "cudnn.allow_tf32: True -> False" in refused.message


def test_a_forward_that_prints_on_every_call_is_not_killed_for_its_output():
    """On a GPU the clocks and the energy loop make thousands of calls: a debug print in forward (or a logged warning)
    would fill the sandbox's output limit. Python's streams are capped for the candidate, so here seven calls of
    300 KB each (2 MB, over the 1 MB limit) pass."""
    code = (CANDIDATES / "correct.py").read_text().replace(
        "    def forward(self, x):\n", "    def forward(self, x):\n        print('debug ' * 50_000)\n"
        "        logging.getLogger(__name__).warning('w' * 50_000)\n", 1)
    code = "import logging\n" + code
    result = evaluate(request(code))
    assert result.verdict == Verdict.CORRECT, result.message


def test_syntax_error_names_the_line():
    result = evaluate(request((CANDIDATES / "syntax_error.py").read_text()))
    assert result.verdict == Verdict.SYNTAX_ERROR and result.message.startswith("line 11:")


@pytest.mark.slow
def test_profile_mode_runs_one_call_and_reports_errors_in_one_line(tmp_path):
    problem = load_problem("gap44")
    good = prepare_job(tmp_path / "good", "profile", problem, code=(CANDIDATES / "correct.py").read_text(), device="cpu",
                       sizes=problem.cpu_sizes[:1])
    r = run_sandboxed(worker_argv(good), workdir=tmp_path / "good", timeout_s=120, env=worker_env("cpu"))
    assert r.returncode == 0, r.stderr
    assert read_result(tmp_path / "good" / "result.json").ok
    bad = prepare_job(tmp_path / "bad", "profile", problem, code=(CANDIDATES / "compile_error.py").read_text(),
                      device="cpu", sizes=problem.cpu_sizes[:1])
    r = run_sandboxed(worker_argv(bad), workdir=tmp_path / "bad", timeout_s=120, env=worker_env("cpu"))
    assert r.returncode == 1
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "BLOCK_SIZES" in lines[0]


def agent(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent", *args], capture_output=True, text=True, cwd=REPO, timeout=300)


def test_cli_eval_prints_json_and_its_exit_code_says_whether_the_answer_is_correct():
    r = agent("eval", str(CANDIDATES / "side_stream.py"), "--problem", "gap44", "--stage", "memory-fusion",
              "--device", "cpu", "--json")
    assert r.returncode == 3, r.stderr  # judged, not correct (2 is a usage error, 1 the harness's own failure)
    out = json.loads(r.stdout)
    assert out["verdict"] == "rule_violation" and "stream" in out["message"] and out["device"] == "cpu"


def test_cli_eval_of_one_answer_is_drawn_as_show_draws_a_candidate():
    """The same header rows, the message in a panel, the same checks and timing tables as `agent show`."""
    r = agent("eval", str(CANDIDATES / "side_stream.py"), "--problem", "gap44", "--stage", "memory-fusion",
              "--device", "cpu")
    assert r.returncode == 3, r.stderr
    lines = r.stdout.splitlines()
    for label in ("answer", "problem", "verdict", "evaluated"):
        assert any(line.startswith(label + " ") for line in lines), (label, r.stdout)
    assert any(line.startswith("╭─ message") for line in lines), r.stdout


@pytest.mark.slow
def test_cli_eval_of_a_folder_judges_every_answer_and_summarizes_like_a_benchmark(tmp_path):
    for name in ("correct.py", "wrong_scale.py", "no_code.md", "side_stream.py"):
        (tmp_path / name).write_text((CANDIDATES / name).read_text())
    (tmp_path / "notes.json").write_text("{}")  # not an answer: skipped
    r = agent("eval", str(tmp_path), "--device", "cpu", "--json", "--cache-dir", str(tmp_path / "cache"))
    assert r.returncode == 3, r.stderr
    out = json.loads(r.stdout)
    assert [Path(x["file"]).name for x in out["results"]] == ["correct.py", "no_code.md", "side_stream.py",
                                                               "wrong_scale.py"]
    assert [x["verdict"] for x in out["results"]] == ["correct", "no_code", "rule_violation", "incorrect"]
    s = out["summary"]
    assert (s["answers"], s["correct"], s["fraction_correct"]) == (4, 1, 0.25)
    assert s["verdicts"] == {"correct": 1, "incorrect": 1, "no_code": 1, "rule_violation": 1}
    for clock in ("device", "latency"):
        assert set(s[clock]) == {"faster_than_eager", "faster_than_compile", "geomean_vs_eager", "geomean_vs_compile"}
        assert s[clock]["faster_than_compile"] is None  # CPU mode times no torch.compile: no fraction, not 0 %
    table = agent("eval", str(tmp_path / "correct.py"), str(tmp_path / "no_code.md"), "--device", "cpu",
                  "--cache-dir", str(tmp_path / "cache"))
    assert table.returncode == 3 and "correct: 1/2 (50 %)" in table.stdout
    # a geometric mean or a fraction "faster than torch.compile" of interpreter timings would mislead
    assert "speedups: n/a (CPU mode)" in table.stdout and "than torch.compile" not in table.stdout


@pytest.mark.slow
def test_cli_eval_counts_answers_cpu_mode_cannot_judge_apart(tmp_path):
    """needs_gpu (Triton only under the interpreter) is neither correct nor failed: the fraction is over the answers
    judged, and the summary says how many need a GPU."""
    for name in ("correct.py", "interpreter_only_triton.py"):
        (tmp_path / name).write_text((CANDIDATES / name).read_text())
    r = agent("eval", str(tmp_path), "--device", "cpu", "--json", "--cache-dir", str(tmp_path / "cache"))
    out = json.loads(r.stdout)
    assert [x["verdict"] for x in out["results"]] == ["correct", "needs_gpu"]
    s = out["summary"]
    assert (s["answers"], s["correct"], s["needs_gpu"], s["fraction_correct"]) == (2, 1, 1, 1.0)
    table = agent("eval", str(tmp_path), "--device", "cpu", "--cache-dir", str(tmp_path / "cache"))
    assert "correct: 1/1 (100 %)" in table.stdout and "1 not judged" in table.stdout, table.stdout
    assert r.returncode == table.returncode == 3  # 0 only when every answer is known to be correct


def test_cli_eval_of_an_answer_that_is_not_utf8_names_it_in_one_line(tmp_path):
    answer = tmp_path / "latin1.py"
    answer.write_bytes("# -*- coding: latin-1 -*-\n# café\n".encode("latin-1") + (CANDIDATES / "correct.py").read_bytes())
    r = agent("eval", str(CANDIDATES / "correct.py"), str(answer), "--device", "cpu")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "latin1.py" in r.stderr and "not UTF-8" in r.stderr


def test_cli_eval_of_a_folder_without_answers_is_one_line(tmp_path):
    r = agent("eval", str(tmp_path), "--device", "cpu")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "no answer in it" in r.stderr


@pytest.mark.slow
def test_cli_eval_json_has_both_clocks_the_objective_energy_and_where_the_time_went(tmp_path):
    cache = tmp_path / "cache"
    args = ("eval", str(CANDIDATES / "correct.py"), "--device", "cpu", "--json", "--cache-dir", str(cache))
    r = agent(*args, "--objective", "energy")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    t = out["timing"]
    assert out["verdict"] == "correct" and t["objective"] == "energy"
    for key in ("device_ms", "latency_ms", "launches", "device_speedup_vs_eager", "latency_speedup_vs_eager",
                "device_speedup_vs_compile", "latency_speedup_vs_compile", "host_ms", "energy_mj"):
        assert key in t
    assert t["candidate_ms"] == t["device_ms"] and t["launches"] >= 1  # energy's plain time: the device clock
    assert t["energy_mj"] is None and t["energy_note"] == "CPU mode: no GPU energy counter"  # never a zero
    assert list(out["phases"])[:4] == ["checks", "prepare", "start", "imports"] and out["phases"]["validate"] > 0
    [entry] = (cache / "references").iterdir()  # the truths, kept for the next process
    written = entry.stat().st_mtime

    again = json.loads(agent(*args).stdout)  # the default objective, a second process: the truths come from disk
    assert again["timing"]["objective"] == "latency" and again["verdict"] == "correct"
    assert [p.name for p in (cache / "references").iterdir()] == [entry.name]
    assert entry.stat().st_mtime > written  # used again (and so kept longest by the bound)


def test_cli_usage_errors_exit_2():
    r = agent("eval", "does-not-exist.md", "--device", "cpu")
    assert r.returncode == 2 and "not found" in r.stderr
    r = agent("eval", str(CANDIDATES / "correct.py"), "--problem", "nope", "--device", "cpu")
    assert r.returncode == 2 and "unknown problem" in r.stderr
    r = agent("eval", str(CANDIDATES / "correct.py"), "--objective", "wall", "--device", "cpu")
    assert r.returncode == 2 and "invalid choice: 'wall'" in r.stderr

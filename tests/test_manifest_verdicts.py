"""bench/checks/manifest_verdicts.py, the one GPU checker of the manifest: which cases a call selects, what each is
held to on a GPU and in CPU mode, and the script itself run in CPU mode on real answers."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from agent.schema import EvalResult, Verdict

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "bench" / "checks" / "manifest_verdicts.py"
sys.path.insert(0, str(SCRIPT.parent))

import manifest_verdicts as M  # noqa: E402

MANIFEST = tomllib.loads((REPO / "tests" / "candidates" / "manifest.toml").read_text())
KB67 = "kb_67_conv2d_gelu_gap"


def test_problem_selects_the_cases_judged_there_and_gap44_is_where_a_case_names_none():
    at_kb67 = M.selected(MANIFEST, [], [], [KB67])
    assert at_kb67 and set(at_kb67) == {n for n, c in MANIFEST.items() if c.get("problem") == KB67}
    at_gap44 = M.selected(MANIFEST, [], [], ["gap44"])
    assert "correct" in at_gap44 and not any("problem" in c for c in at_gap44.values())
    both = M.selected(MANIFEST, [], ["legit_"], [KB67])  # --match and --problem narrow together
    assert set(both) == {n for n in at_kb67 if n.startswith("legit_") or "legit_" in MANIFEST[n]["threat"]}


def test_parts_split_a_selection_into_disjoint_shares_that_cover_it():
    gap44 = M.selected(MANIFEST, [], [], ["gap44"])
    shares = [M.selected(MANIFEST, [], [], ["gap44"], (k, 3)) for k in (1, 2, 3)]
    assert sum(len(s) for s in shares) == len(gap44) and set().union(*shares) == set(gap44)
    assert max(len(s) for s in shares) - min(len(s) for s in shares) <= 1
    assert M.part("2/3") == (2, 3)


@pytest.mark.parametrize("bad", ["0/2", "3/2", "x/2", "2"])
def test_a_bad_part_is_one_line_and_exit_2(bad):
    r = subprocess.run([sys.executable, str(SCRIPT), "--part", bad], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "K/N with 1 <= K <= N" in r.stderr and "Traceback" not in r.stderr


def test_a_gpu_holds_a_case_to_its_gpu_verdict_and_gpu_message_cpu_mode_to_its_own():
    case = MANIFEST["watch_progress_by_host_copy"]  # needs_gpu in CPU mode; refused "to the host" on a GPU
    caught = EvalResult(verdict=Verdict.RULE_VIOLATION, message="the forward used aten._to_copy to the host")
    assert M.judged("w", case, caught, "cuda")["ok"]
    assert not M.judged("w", case, caught.model_copy(update={"message": "a tensor subclass"}), "cuda")["ok"]
    assert not M.judged("w", case, caught, "cpu")["ok"]  # CPU mode cannot judge it: needs_gpu expected there
    cpu = M.judged("w", case, EvalResult(verdict=Verdict.NEEDS_GPU, message="branches on x.is_cuda"), "cpu")
    assert cpu["ok"] and cpu["expected"] == "needs_gpu"
    plain = MANIFEST["tf32_around_the_gemm"]  # no gpu_verdict: the CPU's verdict holds on a GPU too
    assert M.judged("t", plain, EvalResult(verdict=Verdict.RULE_VIOLATION, message="matmul.allow_tf32 False -> True"),
                    "cuda")["expected"] == "rule_violation"


def test_a_cases_time_limit_is_cpu_modes_and_time_true_cases_are_timed():
    slow = MANIFEST["legit_kb67_direct_conv_gelu_gap"]  # 10 s in CPU mode; a GPU gets the harness's scaled limit
    assert M.request(slow, False, "cpu").timeout_s == 10 and M.request(slow, False, "cuda").timeout_s is None
    assert M.request(MANIFEST["correct"], False, "cpu").timeout_s == 120
    assert M.request(MANIFEST["legit_prints_every_call"], False, "cpu").time_it
    assert not M.request(MANIFEST["correct"], False, "cpu").time_it and M.request(MANIFEST["correct"], True, "cpu").time_it


@pytest.mark.slow
def test_the_checker_in_cpu_mode_judges_real_answers_and_writes_its_rows(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), "correct", "cudnn_benchmark_in_forward", "--device", "cpu",
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1] == "2 passed, 0 failed"
    rows = {row["name"]: row for row in json.loads((tmp_path / "manifest_verdicts.json").read_text())["cases"]}
    assert rows["correct"]["got"] == "correct" and rows["cudnn_benchmark_in_forward"]["got"] == "rule_violation"

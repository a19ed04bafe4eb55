"""agent.profiler: running a candidate under ncu in the sandbox, and every way that can fail, with fake `ncu`
executables first on PATH (real subprocesses through the real sandbox; the reports they write are real ones).

The fakes live under /var/tmp, not /tmp: the sandbox gives the candidate (and ncu) a private /tmp.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from agent.errors import UserError
from agent.harness.job import worker_argv
from agent.harness.static.policy import kernel_names
from agent.problems import load_problem, starting_code
from agent.profiler import PROFILED_LAUNCHES, ProfileError, ProfileRequest, find_ncu, ncu_argv, profile
from agent.schema import Stage

DATA = Path(__file__).parent / "data" / "ncu"
STAGE_REPORT = DATA / "seed_h100_metrics.ncu-rep"
FULL_REPORT = DATA / "seed_h100_full.ncu-rep"
KERNEL = "fused_multiply_gap_kernel_optimized"
STAGE = Stage(name="memory-fusion", focus="fusion", template="memory_fusion.j2", metrics=[
    "sm__throughput.avg.pct_of_peak_sustained_elapsed", "launch__grid_size",
    "sm__warps_active.avg.pct_of_peak_sustained_active", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__t_sector_hit_rate.pct",
])

# What every fake shares: ncu's own argument layout (options, then -f -o STEM, then the application).
_PRELUDE = '''
import json, os, shutil, subprocess, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))
argv = sys.argv[1:]
o = argv.index("-o")
stem, app = argv[o + 1], argv[o + 2:]
{before}
while not os.path.exists(app[-1]):  # a run started early: its worker waits for the job (agent.profiler.ProfileRun)
    time.sleep(0.01)
job = json.load(open(app[-1]))

def worker_ok():
    with open(job["result_path"], "w") as f:
        json.dump({"mode": "profile", "ok": True, "phase": "done"}, f)

def report(src, cut=False):
    data = open(src, "rb").read()
    with open(stem + ".ncu-rep", "wb") as f:
        f.write(data[: len(data) // 2] if cut else data)
'''


@pytest.fixture
def fake_ncu(monkeypatch):
    """make(body) -> the fake's directory, first on PATH (world-readable: the sandbox runs ncu unprivileged, and
    read-only: what it must write goes to the workdir)."""
    made: list[Path] = []
    base = "/var/tmp" if os.path.isdir("/var/tmp") and os.access("/var/tmp", os.W_OK) else None

    def make(body: str, before: str = "") -> Path:
        d = Path(tempfile.mkdtemp(prefix="agent-fake-ncu-", dir=base))
        made.append(d)
        for f in (STAGE_REPORT, FULL_REPORT):
            shutil.copyfile(f, d / f.name)
        script = d / "ncu"
        prelude = _PRELUDE.replace("{before}", textwrap.dedent(before))  # `before`: what runs before the job exists
        script.write_text(f"#!{sys.executable}\n{prelude}\n{textwrap.dedent(body)}\n")
        script.chmod(0o755)
        d.chmod(0o755)
        monkeypatch.setenv("PATH", f"{d}{os.pathsep}{os.environ.get('PATH', '')}")
        return d

    yield make
    for d in made:
        shutil.rmtree(d, ignore_errors=True)


def request(tmp_path: Path, **kw) -> ProfileRequest:
    problem = load_problem("gap44")
    return ProfileRequest(code=starting_code(problem), problem=problem, stage=STAGE,
                          out=tmp_path / "profiles" / "adhoc" / "seed.ncu-rep", timeout_s=kw.pop("timeout_s", 60), **kw)


def test_profiles_the_candidates_kernels_in_the_nvtx_range_and_saves_report_and_json(tmp_path, fake_ncu):
    d = fake_ncu('worker_ok(); report(os.path.join(HERE, "seed_h100_metrics.ncu-rep")); print("==PROF== Disconnected")')
    req = request(tmp_path)
    prof = profile(req)

    assert req.out.is_file() and req.out.read_bytes() == STAGE_REPORT.read_bytes()
    saved = json.loads(req.out.with_suffix(".json").read_text())
    assert saved["kernels"][KERNEL]["metrics"]["launch__grid_size"] == 32
    assert prof.kernels[KERNEL].metrics["gpu__time_duration.sum"] == 685824
    assert prof.bottleneck is not None and prof.bottleneck.kind == "latency-bound"
    assert prof.metric_set == "stage" and prof.wall_s > 0

    argv = ncu_argv(d / "ncu", req, kernel_names(req.code), tmp_path / "profile") + worker_argv(tmp_path / "job.json")
    opts = " ".join(argv[: argv.index("-o")])
    assert "--nvtx --nvtx-include agent_profile/" in opts  # trailing slash: a push/pop range
    assert "--kernel-name regex:^(fused_multiply_gap_kernel_optimized|fused_multiply_gap_kernel_small)$" in opts
    assert "--target-processes all" in opts and "--clock-control base" in opts
    # a sample of each kernel's launches: a forward of 2048 launches replays 16 here, not 2048
    assert f"--launch-count {2 * PROFILED_LAUNCHES}" in opts and PROFILED_LAUNCHES == 8
    metrics = argv[argv.index("--metrics") + 1].split(",")
    assert metrics[:5] == STAGE.metrics and "gpu__time_duration.sum" in metrics
    from agent.diagnosis import DIAGNOSIS_METRICS  # what the analyzers read beyond the stage: the roofline's too

    # device attributes are in every report, never counters to collect
    counters = {m for m in DIAGNOSIS_METRICS if not m.startswith("device__")}
    assert counters <= set(metrics) and len(metrics) == len(set(metrics)) and not any(
        m.startswith("device__") for m in metrics)
    assert {"dram__bytes_read.sum", "launch__occupancy_limit_registers",
            "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed"} <= set(metrics)
    app = argv[argv.index("-o") + 2:]
    assert app[1:3] == ["-m", "agent.harness.worker.main"]
    assert app[-1].endswith("job.json")


def test_a_profile_says_where_its_time_went_from_the_workers_marks(tmp_path, fake_ncu):
    """Phases as the profile worker marks them: start (ncu and Python), imports, compile (the first call), gpu wait
    (the GPU alone: shared until then), replays (warm-up and the profiled call under ncu), exit (ncu's report), read."""
    fake_ncu("""
        t = time.monotonic()
        time.sleep(0.3)
        marks = {"main": t + 0.05, "imported": t + 0.1, "first": t + 0.15, "locked": t + 0.2, "profiled": t + 0.25}
        with open(job["result_path"], "w") as f:
            json.dump({"mode": "profile", "ok": True, "phase": "done", "marks": marks}, f)
        report(os.path.join(HERE, "seed_h100_metrics.ncu-rep"))
        """)
    prof = profile(request(tmp_path))
    assert list(prof.phases) == ["start", "imports", "compile", "gpu wait", "replays", "exit", "read"]
    assert all(abs(prof.phases[k] - 0.05) < 0.02 for k in ("imports", "compile", "gpu wait", "replays"))
    assert prof.phases["exit"] >= 0.05 and sum(v for k, v in prof.phases.items() if k != "read") == \
        pytest.approx(prof.wall_s, abs=0.01)
    saved = json.loads(prof.model_dump_json())
    assert saved["phases"] == prof.phases


def test_a_report_of_kernels_the_candidate_does_not_define_is_refused(tmp_path, fake_ncu):
    """ncu profiles the candidate's kernels by exact name; another name is a report the candidate wrote itself."""
    fake_ncu('worker_ok(); report(os.path.join(HERE, "seed_h100_metrics.ncu-rep"))')
    req = request(tmp_path).model_copy(update={"code": starting_code(load_problem("gap44")).replace(
        KERNEL, "renamed_kernel")})
    with pytest.raises(ProfileError) as e:
        profile(req)
    assert e.value.kind == "no_kernels" and KERNEL in e.value.message and "renamed_kernel" in e.value.message


def test_full_set_asks_for_the_full_section_set_and_keeps_rules(tmp_path, fake_ncu):
    d = fake_ncu('worker_ok(); report(os.path.join(HERE, "seed_h100_full.ncu-rep"))')
    req = request(tmp_path, metric_set="full", clock_control="none")
    prof = profile(req)
    argv = ncu_argv(d / "ncu", req, kernel_names(req.code), tmp_path / "profile")
    assert argv[argv.index("--set") + 1] == "full" and "--metrics" not in argv
    assert argv[argv.index("--clock-control") + 1] == "none"
    assert prof.metric_set == "full" and prof.kernels[KERNEL].rules


def test_missing_counter_permission_says_how_to_enable_it(tmp_path, fake_ncu):
    fake_ncu('''
        print("==PROF== Connected to process 77 (python3.11)")
        print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
              "Counters on the target device 0. For instructions on enabling permissions and to get more "
              "information see https://developer.nvidia.com/ERR_NVGPUCTRPERM")
        print("==WARNING== No kernels were profiled.")
        sys.exit(1)
    ''')
    with pytest.raises(ProfileError) as e:
        profile(request(tmp_path))
    assert e.value.kind == "permission" and "ERR_NVGPUCTRPERM" in e.value.message
    assert "NVreg_RestrictProfilingToAdminUsers=0" in e.value.hint
    assert "\n" not in str(e.value)


def test_a_hanging_ncu_times_out(tmp_path, fake_ncu):
    fake_ncu("time.sleep(60)")
    with pytest.raises(ProfileError, match="timed out after 1 s") as e:
        profile(request(tmp_path, timeout_s=1))
    assert e.value.kind == "timeout"
    assert not (tmp_path / "profiles" / "adhoc" / "seed.ncu-rep").exists()


@pytest.mark.slow  # runs the real worker (imports torch) under the fake ncu
def test_a_candidate_that_fails_under_ncu_is_reported_with_the_workers_message(tmp_path, fake_ncu):
    # this fake really runs the application: the worker, asked for CUDA on a CPU-only machine, fails
    fake_ncu('''
        rc = subprocess.call(app)
        if rc:
            print(f"==ERROR== The application returned an error code ({rc}).")
        sys.exit(rc)
    ''')
    if _has_cuda():
        pytest.skip("needs a machine without CUDA for the worker to fail")
    with pytest.raises(ProfileError, match="the candidate failed under ncu: runtime_error") as e:
        profile(request(tmp_path))
    assert e.value.kind == "crash"
    assert "\n" not in str(e.value)


def test_no_kernel_in_the_range_is_its_own_error(tmp_path, fake_ncu):
    fake_ncu('worker_ok(); print("==WARNING== No kernels were profiled.")')
    with pytest.raises(ProfileError, match="ncu profiled no kernel: none of fused_multiply_gap_kernel_optimized") as e:
        profile(request(tmp_path))
    assert e.value.kind == "no_kernels"


def test_a_truncated_report_is_a_one_line_error(tmp_path, fake_ncu):
    fake_ncu('worker_ok(); report(os.path.join(HERE, "seed_h100_metrics.ncu-rep"), cut=True)')
    with pytest.raises(ProfileError, match="truncated") as e:
        profile(request(tmp_path))
    assert e.value.kind == "no_report"


def test_ncu_dying_without_a_report_is_an_error(tmp_path, fake_ncu):
    fake_ncu('print("==ERROR== Failed to connect to the target process", file=sys.stderr); sys.exit(2)')
    with pytest.raises(ProfileError, match="Failed to connect to the target process"):
        profile(request(tmp_path))


def test_without_ncu_anywhere_profiling_says_so(tmp_path, monkeypatch):
    if any(Path(p).exists() for p in ["/usr/local/cuda/bin/ncu"]) or list(Path("/opt/nvidia").glob("nsight-compute/*/ncu")):
        pytest.skip("ncu is installed here")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_ncu() is None
    with pytest.raises(ProfileError, match="ncu \\(Nsight Compute\\) not found") as e:
        profile(request(tmp_path))
    assert e.value.kind == "not_installed" and isinstance(e.value, UserError)


def test_a_candidate_without_triton_kernels_is_refused_before_running_ncu(tmp_path, fake_ncu):
    fake_ncu("worker_ok()")
    req = request(tmp_path)
    req.code = "import torch.nn as nn\nclass ModelNew(nn.Module):\n    pass\n"
    with pytest.raises(ProfileError, match="no @triton.jit kernel"):
        profile(req)


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False

"""Run a candidate under Nsight Compute, inside the harness sandbox, and read what it measured.

    ncu --target-processes all --nvtx --nvtx-include agent_profile/ --kernel-name regex:^(k1|k2)$
        --launch-count 16 --clock-control base (--metrics M1,M2,... --section SourceCounters | --set full) --import-source no
        -f -o WORKDIR/profile
        python -m agent.harness.worker.main WORKDIR/job.json          (mode "profile")

The worker warms the candidate up (JIT compilation happens there, outside the range), then runs one call inside
the push/pop NVTX range "agent_profile" (the trailing slash in --nvtx-include selects push/pop ranges); ncu keeps
only kernels inside that range whose function names are the candidate's own @triton.jit kernels, so neither
compilation nor the PyTorch parts (the ConvTranspose2d, the reference) are profiled. Of a forward that launches its
kernels thousands of times (a loop over rows) ncu profiles the first PROFILED_LAUNCHES per kernel (its launch count
counts only what the filters keep: ncu 2025.3's --kernel-id takes an invocation number, not a range, and the
harness's warm-up calls come first); the diagnosis takes the launches per forward from the harness's timing.

ncu runs inside the sandbox's namespaces with its target (ncu outside with the target inside hangs, DESIGN.md).
It writes the report into the sandbox's workdir (the only place under /tmp the namespace shares); the report is
then moved to `out`, and the parsed Profile written beside it as JSON.

Clock control: `base` (ncu's default) by default. ncu then locks the SM clock to base (1.59 vs 1.98 GHz boost on
an H100; the DRAM clock stays), so durations read ~0-7 % longer than the harness's timings, but metrics are
repeatable from one iteration to the next, which is what the prompt's numbers and `agent ncu --diff` compare.
Speed decisions use the harness's timing, never ncu's duration. `none` profiles at the clocks the timing saw.

Every failure is a ProfileError (a UserError): one line saying what went wrong, a hint where one helps; the
agent's loop records it and carries on.

Over 400 lines: ncu's command line, one run's life (started early, released, finished: ProfileRun) and the reading
of how it failed belong together; the pool of runs started early is agent.profilewarm.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from agent.errors import UserError
from agent.ncu.locate import find_ncu
from agent.schema import Model, ProblemSpec, Profile, Stage

if TYPE_CHECKING:
    from agent.harness.job import WorkerResult
    from agent.profilewarm import WarmRuns
    from agent.harness.wall.sandbox import SandboxResult

log = logging.getLogger(__name__)

NVTX_RANGE = "agent_profile"
PROFILED_LAUNCHES = 8  # per kernel of the candidate; a forward launching each once or twice is profiled whole
_REPORT_STEM = "profile"  # ncu -o WORKDIR/profile writes WORKDIR/profile.ncu-rep
_PERM_HINT = (
    "run as root, or let every user read GPU counters: `options nvidia NVreg_RestrictProfilingToAdminUsers=0` "
    "in /etc/modprobe.d/, then reload the driver (https://developer.nvidia.com/ERR_NVGPUCTRPERM)"
)


class ProfileError(UserError):
    """Profiling failed; `kind` names how (for the loop's record), the message says it in one line."""

    def __init__(
        self,
        kind: Literal["not_installed", "permission", "timeout", "crash", "no_kernels", "no_report", "failed"],
        message: str,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint)
        self.kind = kind


class ProfileRequest(Model):
    """What to profile, how, and where the report goes."""

    code: str = Field(description="the candidate's source (a module defining ModelNew)")
    problem: ProblemSpec
    stage: Stage
    metric_set: Literal["stage", "full"] = Field(
        default="stage", description="stage: the stage's metrics (ncu.stage_metric_set); full: ncu's --set full with rules"
    )
    out: Path = Field(description="the .ncu-rep to write, e.g. profiles/<run or adhoc>/<candidate>.ncu-rep")
    timeout_s: float = Field(default=600.0, description="wall-clock limit for ncu and the candidate together")
    device: int = Field(default=0, description="CUDA device index (of those visible to this process)")
    clock_control: Literal["base", "none"] = Field(
        default="base", description="ncu --clock-control: base locks the SM clock to base (repeatable metrics)"
    )
    warmup: int = Field(default=3, description="uncounted calls before the profiled one (JIT compile, autotune)")
    source_counters: bool = Field(default=True, description="the stage set with ncu's SourceCounters section "
                                  "(per-instruction counts and warp samples: `agent show --sass`)")
    launches_per_kernel: int = Field(default=PROFILED_LAUNCHES, ge=1, description="launches profiled per kernel of "
                                     "the candidate (their total caps ncu's launch count): a forward of thousands "
                                     "of launches profiles in seconds, not hours")
    gpu_lock: Path | None = Field(default=None, description="the GPU's lock, where several workers share the GPU")
    hide: list[Path] = Field(default_factory=list, description="directories the candidate must not see (the store)")


def ncu_argv(ncu: Path, req: ProfileRequest, kernels: list[str], report_stem: Path) -> list[str]:
    """ncu's command line for a request (without the application's)."""
    from agent.ncu import stage_metric_set

    argv = [
        str(ncu), "--target-processes", "all",
        "--nvtx", "--nvtx-include", f"{NVTX_RANGE}/",
        "--kernel-name", "regex:^(" + "|".join(re.escape(k) for k in kernels) + ")$",
        # a forward of thousands of launches would replay every one of them: profile a sample (ncu counts only the
        # launches its filters keep, so the sample is the measured forward's first launches)
        "--launch-count", str(req.launches_per_kernel * len(kernels)),
        "--clock-control", req.clock_control,
    ]
    if req.metric_set == "full":
        argv += ["--set", "full", "--import-source", "no", "--apply-rules", "yes"]
    else:
        # The stage's metrics, what the diagnosis reads beyond them (stalls, spills, access efficiency), and the
        # per-instruction source counters (`agent show --sass`: executed counts and warp samples per instruction).
        from agent.diagnosis import DIAGNOSIS_METRICS

        wanted = stage_metric_set(req.stage)
        # device attributes are in every report; they are not counters to collect
        extra = [m for m in DIAGNOSIS_METRICS if m not in wanted and not m.startswith("device__")]
        argv += ["--metrics", ",".join([*wanted, *extra]),
                 *(["--section", "SourceCounters"] if req.source_counters else []), "--import-source", "no"]
    return argv + ["-f", "-o", str(report_stem)]


def profile(req: ProfileRequest) -> Profile:
    """Profile the candidate's kernels: writes `req.out` (the report) and `req.out` with .json (the parsed Profile).

    Raises ProfileError (one line) when ncu is missing, lacks counter permission, times out, the candidate
    crashes under it, no kernel was profiled, or the report cannot be read.
    """
    run = ProfileRun(req)
    run.release(req.code, req.out)
    return run.finish()


def kernels_of(code: str) -> list[str]:
    """The candidate's @triton.jit kernel names, which ncu's command line names (a run started early needs them)."""
    from agent.harness.static.parsing import PARSING
    from agent.harness.static.policy import kernel_names

    with PARSING:  # a profile started ahead of need runs beside the round's evaluations
        return kernel_names(code)


class ProfileRun:
    """One ncu run of a profile worker, started at once with its job unpublished: ncu and the worker's imports
    (~7 of a profile's ~12 s on an H200: bench/diag/profile_phases.py) happen before `release` names the code (any
    code with the same kernel names: ncu's command line names them) and where the report goes; `finish` waits and
    reads it; `cancel` ends a run never released. Raises ProfileError where ncu or the kernels are missing."""

    def __init__(self, req: ProfileRequest, cap_s: float | None = None) -> None:
        from agent.harness.job import prepare_job
        from agent.harness.runner import run_job
        from agent.harness.wall.sandbox import Deadline

        ncu = find_ncu()
        if ncu is None:
            raise ProfileError("not_installed", "ncu (Nsight Compute) not found on PATH, in /usr/local/cuda/bin or "
                               "/opt/nvidia/nsight-compute/*/", hint="install Nsight Compute or put ncu on PATH")
        self.kernels = kernels_of(req.code)
        if not self.kernels:
            raise ProfileError("no_kernels", "the candidate defines no @triton.jit kernel to profile")
        if req.gpu_lock is None:  # behind this GPU's lock, like every evaluation here (exclusive while counting)
            from agent.harness.wall.gpulock import lock_path

            req = req.model_copy(update={"gpu_lock": lock_path(_visible_device(req.device))})
        self.req = req
        self.workdir = Path(tempfile.mkdtemp(prefix="agent-profile-"))
        self.job_path = prepare_job(self.workdir, "profile", req.problem, code=req.code, device="cuda",
                                    gpu_lock=req.gpu_lock, publish=False)
        _set_warmup(self.job_path, req.warmup)
        self.stem = self.workdir / _REPORT_STEM
        wrap = ncu_argv(ncu, req, self.kernels, self.stem)
        log.debug("profiling: %s", " ".join(wrap))
        self.deadline = Deadline()
        self.started = time.monotonic()
        self._res: SandboxResult | None = None
        self._error: BaseException | None = None
        self._ended = 0.0

        def run() -> None:
            try:  # cap_s bounds a run nobody releases; the profile's own limit starts at release
                self._res = run_job(self.workdir, self.job_path, "cuda", cap_s or req.timeout_s, None, list(req.hide),
                                    req.gpu_lock, self.deadline, wrap=wrap,
                                    env={"CUDA_VISIBLE_DEVICES": _visible_device(req.device)},
                                    output_limit_bytes=8 << 20)
            except BaseException as e:  # a sandbox that cannot be built: raised again in finish()
                self._error = e
            self._ended = time.monotonic()

        self._thread = threading.Thread(target=run, name="agent-profile", daemon=True)
        self._thread.start()

    def alive(self) -> bool:
        """Whether the run still waits for (or works on) its job."""
        return self._thread.is_alive()

    def release(self, code: str, out: Path) -> None:
        """Profile `code` (with this run's kernel names) into `out`: hand the worker its candidate and its job."""
        from agent.harness.job import publish_job, write_candidate
        from agent.harness.wall.sandbox import hand_over

        if code != self.req.code:
            write_candidate(self.workdir, code)
        self.req = self.req.model_copy(update={"code": code, "out": out})
        hand_over(self.workdir)
        self.deadline.arm(self.req.timeout_s)
        publish_job(self.job_path)

    def cancel(self) -> None:
        """End a run never released (its worker waits for a job that will not come)."""
        self.deadline.cancel()
        self._thread.join()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def finish(self) -> Profile:
        """Wait for the released run and read its report (ProfileError where it failed)."""
        from agent.harness.job import read_result
        from agent.ncu import read_report, stage_metric_set

        req, workdir = self.req, self.workdir
        try:
            self._thread.join()
            if self._error is not None:
                raise self._error
            assert self._res is not None
            res, ended = self._res, self._ended
            wall = ended - self.started
            result = read_result(workdir / "result.json")
            report = self.stem.with_name(self.stem.name + ".ncu-rep")
            failure = _failure(req, self.kernels, res, result, report)
            if failure is not None:
                raise failure
            try:
                req.out.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(report), req.out)
            except OSError as e:
                raise ProfileError("failed", f"cannot save the report as {req.out}: {e.strerror or e}") from e
            try:
                # the stage's metrics, and what the diagnosis reads beyond them where the report has it (full set)
                from agent.diagnosis import DIAGNOSIS_METRICS

                wanted = stage_metric_set(req.stage)
                prof = read_report(req.out, [*wanted, *(m for m in DIAGNOSIS_METRICS if m not in wanted)])
            except UserError as e:
                raise ProfileError("no_report", e.message, e.hint) from e
            # ncu was told to profile the candidate's kernels by exact name: another name means a report the
            # candidate wrote itself, and names reach the next prompt (the metrics, the diagnosis): keep its own.
            foreign = [name for name in prof.kernels if name not in self.kernels]
            for name in foreign:
                del prof.kernels[name]
            if not prof.kernels:
                raise ProfileError("no_kernels", f"the report holds none of the candidate's kernels "
                                   f"({', '.join(self.kernels)}), only {', '.join(foreign)[:200]}")
            prof.metric_set, prof.wall_s = req.metric_set, round(wall, 3)
            prof.phases = profile_phases(self.started, result.marks if result else {}, ended, time.monotonic())
            req.out.with_suffix(".json").write_text(prof.model_dump_json(indent=2))
            return prof
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


# The profile worker's marks (agent.harness.worker.candidate.profile), in order, each ending the phase named beside it.
_MARKS = (("main", "start"), ("imported", "imports"), ("first", "compile"), ("locked", "gpu wait"),
          ("profiled", "replays"))


def profile_phases(started: float, marks: dict[str, float], exited: float, read: float) -> dict[str, float]:
    """Seconds per phase of one profiling run: ncu's and Python's start, the imports, the first call (compiling),
    waiting for the GPU alone, the warm-up and profiled calls with ncu's replays, then ncu writing its report
    (`exit`) and this process reading it (`read`). Marks are clamped into the run (they are the worker's word)."""
    from agent.harness.pipeline import marked_spans

    out, at = marked_spans(_MARKS, marks, started, exited)
    out["exit"] = round(exited - at, 3)
    out["read"] = round(read - exited, 3)
    return out


def _failure(req: ProfileRequest, kernels: list[str], res: SandboxResult, result: WorkerResult | None,
             report: Path) -> ProfileError | None:
    """Why a profiling run failed, from what the sandbox, the worker and ncu left (None: it did not)."""
    text = res.stdout + "\n" + res.stderr
    if res.timed_out:
        return ProfileError("timeout", f"ncu timed out after {req.timeout_s:g} s ({req.metric_set} set)",
                            hint="raise --timeout; the full set replays each kernel ~40 times")
    if "ERR_NVGPUCTRPERM" in text:
        return ProfileError("permission", "ncu has no permission to read the GPU's performance counters "
                            "(ERR_NVGPUCTRPERM)", hint=_PERM_HINT)
    if res.killed:
        return ProfileError("failed", f"ncu was killed by the sandbox ({res.killed} limit)")
    if result is not None and not result.ok or (result is None and _worker_error(text)):
        return ProfileError("crash", f"the candidate failed under ncu: {_worker_error(text) or 'no message'}")
    if "No kernels were profiled" in text or (res.returncode == 0 and result is not None and not report.exists()):
        return ProfileError("no_kernels", f"ncu profiled no kernel: none of {', '.join(kernels)} ran inside the "
                            f"NVTX range {NVTX_RANGE!r}", hint="does ModelNew.forward launch its Triton kernels?")
    if result is None:
        why = _ncu_error(text) or (f"signal {res.signal}" if res.signal else f"exit status {res.returncode}")
        return ProfileError("crash", f"the candidate or ncu died before finishing: {why}")
    if not report.exists():
        why = _ncu_error(text) or f"exit status {res.returncode}"
        return ProfileError("no_report", f"ncu wrote no report: {why}")
    return None


def _set_warmup(job_path: Path, warmup: int) -> None:
    """The profile's warm-up and range in its job, still unpublished (job.json.tmp: ProfileRun.release names it)."""
    from agent.harness.job import JOB_FILE, WorkerJob, write_job

    job = WorkerJob.model_validate_json(job_path.with_name(JOB_FILE + ".tmp").read_text())
    job.profile_warmup, job.nvtx_range = warmup, NVTX_RANGE
    write_job(job_path.parent, job, publish=False)


def _visible_device(index: int) -> str:
    """CUDA_VISIBLE_DEVICES for device `index` of those this process sees (respecting an existing mask)."""
    visible = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if visible:
        if index >= len(visible):
            raise ProfileError("failed", f"device {index} is not visible (CUDA_VISIBLE_DEVICES={','.join(visible)})")
        return visible[index]
    return str(index)


# The worker's one stderr line on failure: "runtime_error (run): RuntimeError: ... (candidate line 12: `...`)"
_WORKER_LINE = re.compile(r"^(compile_error|runtime_error) \(\w+\): .*$", re.M)


def _worker_error(text: str) -> str | None:
    m = _WORKER_LINE.search(text)
    return m.group(0).strip()[:500] if m else None


def _ncu_error(text: str) -> str | None:
    for line in text.splitlines():
        if line.startswith("==ERROR=="):
            return line.removeprefix("==ERROR==").strip()[:300]
    return None


class NcuProfiler:
    """agent.protocols.Profiler here: a new best profiled with ncu into profiles/<run>/<candidate>.ncu-rep; None where
    ncu cannot run (CPU mode, no ncu, no permission), the reason shown through `on_error` and logged. `warm`: profile
    runs started before their code is known (agent.profilewarm), used where one waits for the code's kernel names."""

    def __init__(self, problem: ProblemSpec, out: Callable[[str], Path], device: str,
                 metric_set: Literal["stage", "full"] = "stage", timeout_s: float = 600.0,
                 on_error: Callable[[str], None] | None = None, hide: list[Path] | None = None,
                 warm: WarmRuns | None = None) -> None:
        self.problem, self.out, self.device, self.metric_set, self.timeout_s = problem, out, device, metric_set, timeout_s
        self.on_error = on_error or (lambda msg: None)
        self.hide = hide or []
        self.warm = warm

    @property
    def enabled(self) -> bool:
        return self.device == "cuda"

    def request(self, code: str, stage: Stage, candidate_id: str) -> ProfileRequest:
        return ProfileRequest(code=code, problem=self.problem, stage=stage, metric_set=self.metric_set,
                              out=self.out(candidate_id), timeout_s=self.timeout_s, hide=self.hide)

    def prepare(self, code: str, stage: Stage) -> None:
        """Start a profile run for code like this one (its kernel names), to be used when one is asked for."""
        if self.device == "cuda" and self.warm is not None:
            self.warm.start(self.request(code, stage, "next"))

    def profile(self, code: str, stage: Stage, candidate_id: str) -> Profile | None:
        if self.device != "cuda":
            return None  # CPU mode: there is no GPU to count
        req = self.request(code, stage, candidate_id)
        try:
            run = self.warm.take(code, stage.name) if self.warm is not None else None
            if run is None:
                return profile(req)
            try:
                run.release(code, req.out)
            except OSError as e:  # its workdir went: profile from a fresh start
                log.debug("a profile run started early could not take %s: %s", candidate_id, e)
                run.cancel()
                return profile(req)
            return run.finish()
        except ProfileError as e:  # the loop goes on without metrics; the reason is shown and logged
            log.warning("profiling %s failed: %s", candidate_id, e)
            self.on_error(f"profiling {candidate_id} failed: {e}")
            if e.kind in ("not_installed", "permission") and self.warm is not None:
                self.warm.close()  # every run would fail the same way: start none ahead
                self.warm = None
            return None
        finally:
            self.prepare(code, stage)  # the next of its kind starts warm

    def close(self) -> None:
        if self.warm is not None:
            self.warm.close()


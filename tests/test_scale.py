"""agent.scale in CPU mode: a round spread over several workers (local processes and Ray actors) gives every
candidate its verdict in order; a worker killed mid-candidate costs that candidate only (runtime_error), is replaced,
and leaves no candidate process behind; the per-GPU lock keeps timing exclusive; flags fail in one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent.errors import UserError
from agent.harness.evaluator import RoundRequests
from agent.harness.wall.gpulock import GpuLock, lock_path
from agent.problems import load_problem
from agent.scale import (
    RAY_HINT,
    ScaleEvaluator,
    WorkerPool,
    connect,
    local_pool,
    parse_gpus,
    ray_pool,
)
from agent.schema import Stage, StageRules, Verdict

CANDIDATES = Path(__file__).parent / "candidates"
STAGE = Stage(name="memory-fusion", focus="memory fusion", template="memory-fusion.j2", metrics=[],
              rules=StageRules(forbid_store_then_load=True, max_intermediate_write=0.125))


def read(*names: str) -> list[str]:
    return [(CANDIDATES / n).read_text() for n in names]


def evaluator(pool: WorkerPool, timeout_s: float = 60, gpu_lock: Path | None = None, **kw) -> ScaleEvaluator:
    return ScaleEvaluator(pool, RoundRequests(problem=load_problem("gap44"), device="cpu", timeout_s=timeout_s,
                                              gpu_lock=gpu_lock), **kw)


# ---------------------------------------------------------------- killing a worker from outside, as a crash would


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for e in os.scandir("/proc"):
        if e.name.isdigit():
            try:
                with open(f"/proc/{e.name}/stat", "rb") as f:
                    ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(e.name))
    return kids


def candidate_processes(pid: int) -> list[int]:
    """The candidate subprocesses (sandboxed harness workers in an agent-eval- workdir) below process `pid`."""
    kids, found, todo = _children(), [], [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            todo.append(c)
            try:
                cmd = Path(f"/proc/{c}/cmdline").read_bytes()
            except OSError:
                continue
            if b"agent.harness.worker.main" in cmd and b"agent-eval-" in cmd and b"unshare" not in cmd:
                found.append(c)
    return found


def kill_when_running(pool: WorkerPool, index: int, kill) -> dict:
    """In a thread: once candidate `index` runs in its subprocess on some worker, kill that worker."""
    seen: dict = {}

    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for h in pool.handles:
                pid = getattr(h, "pid", None)
                if h.current == index and pid and candidate_processes(pid):
                    time.sleep(0.6)  # mid-candidate, and past the driver's 0.25 s look at the worker's children
                    seen["candidates"] = candidate_processes(pid)
                    seen["worker"] = h.label
                    kill(h)
                    return
            time.sleep(0.1)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    seen["thread"] = t
    return seen


def alive(pids: list[int]) -> list[int]:
    out = []
    for p in pids:
        try:
            state = Path(f"/proc/{p}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in (b"Z", b"X"):
            out.append(p)
    return out


# ---------------------------------------------------------------- local worker processes


@pytest.mark.slow
def test_two_workers_give_a_mixed_round_its_verdicts_in_order(tmp_path, monkeypatch):
    # The two workers share one GPU lock, as two slots of a GPU do: validations overlap, timings take turns.
    lock = lock_path(f"test-scale-{os.getpid()}")  # outside /tmp: a candidate's /tmp is private
    lines: list[str] = []
    pool = local_pool(parse_gpus("0,1", "cpu"), "cpu")
    try:
        results = evaluator(pool, gpu_lock=lock, on_round=lines.append).evaluate(
            read("correct.py", "syntax_error.py", "wrong_scale.py", "oob_crash.py"), STAGE)
    finally:
        pool.close()
    assert [r.verdict for r in results] == [Verdict.CORRECT, Verdict.SYNTAX_ERROR, Verdict.INCORRECT,
                                            Verdict.RUNTIME_ERROR]
    assert "SIGSEGV" in results[3].message
    assert results[0].timing is not None and lock.exists()  # timed under the lock
    for f in (lock, lock.with_suffix(".turn")):
        f.unlink(missing_ok=True)
    assert len(lines) == 1 and "2 workers" in lines[0] and "candidates/min" in lines[0]


@pytest.mark.slow
def test_worker_killed_mid_candidate_costs_only_that_candidate_and_is_replaced():
    pool = local_pool(["cpu0"], "cpu")
    first_pid = pool.handles[0].pid
    try:
        seen = kill_when_running(pool, 0, lambda h: os.kill(h.pid, signal.SIGKILL))
        results = evaluator(pool).evaluate(read("infinite_loop.py", "correct.py"), STAGE)
        seen["thread"].join(timeout=5)
        assert seen.get("candidates"), "the worker was never caught mid-candidate"
        assert results[0].verdict == Verdict.RUNTIME_ERROR
        assert "worker died" in results[0].message and "SIGKILL" in results[0].message
        assert results[0].code and "gap_kernel" in results[0].kernels  # the store still gets the code
        assert results[1].verdict == Verdict.CORRECT  # evaluated by the replacement
        assert pool.handles[0].pid != first_pid and pool.handles[0].proc.is_alive()
        time.sleep(0.5)
        assert alive(seen["candidates"]) == []  # the dead worker's infinite loop does not spin on
    finally:
        pool.close()


def test_a_pool_closes_its_worker_processes():
    pool = local_pool(["cpu0", "cpu1"], "cpu")
    procs = [h.proc for h in pool.handles]
    pool.close()
    assert not any(p.is_alive() for p in procs)


# ---------------------------------------------------------------- Ray actors


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray", reason="ray is an optional extra: pip install -e '.[ray]'")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_ray_actors_evaluate_a_round_and_replace_a_killed_actor(ray_cluster):
    pool = ray_pool("local", "cpu")
    assert pool.workers == 2 and pool.kind == "ray"
    try:
        seen = kill_when_running(pool, 0, lambda h: ray_cluster.kill(h.actor))
        results = evaluator(pool).evaluate(read("infinite_loop.py", "wrong_scale.py"), STAGE)
        seen["thread"].join(timeout=5)
        assert seen.get("candidates"), "the actor was never caught mid-candidate"
        assert [r.verdict for r in results] == [Verdict.RUNTIME_ERROR, Verdict.INCORRECT]
        assert "Ray actor died" in results[0].message
        replaced = next(h for h in pool.handles if h.label == seen["worker"])
        assert replaced.call("info", (), 120)[0] == "ok"  # a new actor stands in its place
        time.sleep(0.5)
        assert alive(seen["candidates"]) == []
    finally:
        pool.close()


def test_missing_ray_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` sees where it is not installed
    with pytest.raises(UserError) as e:
        connect("auto")
    assert e.value.hint == RAY_HINT and "\n" not in e.value.message


# ---------------------------------------------------------------- the per-GPU lock


def test_timing_waits_for_validations_and_new_validations_wait_for_timing(tmp_path):
    validating, timing, late = (GpuLock(tmp_path / "gpu-0.lock") for _ in range(3))
    order: list[str] = []
    validating.shared()

    def time_it() -> None:
        timing.exclusive()
        order.append("timing")
        time.sleep(0.3)
        timing.release()

    def validate_later() -> None:
        late.shared()
        order.append("late validation")
        late.release()

    t = threading.Thread(target=time_it)
    t.start()
    time.sleep(0.2)
    u = threading.Thread(target=validate_later)  # arrives while timing waits: must queue behind it
    u.start()
    time.sleep(0.2)
    assert order == []  # timing never overlaps a validation in progress
    order.append("validation done")
    validating.release()
    t.join(5)
    u.join(5)
    assert order == ["validation done", "timing", "late validation"]


# ---------------------------------------------------------------- flags


def test_gpu_lists_name_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert parse_gpus("all", "cuda") == ["3", "5"]
    assert parse_gpus("1", "cuda") == ["5"]
    for bad in ("2", "0,0", "x"):
        with pytest.raises(UserError):
            parse_gpus(bad, "cuda")
    assert parse_gpus("0,1,2", "cpu") == ["cpu0", "cpu1", "cpu2"]
    with pytest.raises(UserError):
        parse_gpus("all", "cpu")


def test_cli_rejects_gpus_all_without_a_gpu_and_gpus_with_cluster(tmp_path):
    def agent(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "agent", "run", "--root", str(tmp_path), "--llm", "offline",
                               *args], capture_output=True, text=True, timeout=120)

    r = agent("--device", "cpu", "--gpus", "all")
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert r.returncode == 2 and len(errors) == 1 and "--gpus all" in errors[0]
    r = agent("--device", "cpu", "--gpus", "0", "--cluster", "local")
    assert r.returncode == 2 and "not allowed with" in r.stderr

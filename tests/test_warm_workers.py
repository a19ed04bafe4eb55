"""agent.harness.wall.template and agent.harness.wall.forkserver: each worker is forked from a template that imported torch,
Triton and the harness and never ran a candidate, so it starts from a state no earlier candidate touched.

The hostile answers here run without the static policy (prepare_job + run_job, as the pipeline runs an answer
that passed it): the wall, not the policy, is under test. Each leaves what it can for the next worker (patched
torch, Triton and nn.Module methods, a cached tensor, a module in sys.modules, os.environ, files in every place it
can write, a thread that keeps patching, a detached process); the witness after it, forked from the same template,
reports what it sees, and an honest answer judged after it is correct. Were a worker reused, or the template the
one that ran the hostile code, the witness would see the leftovers and the honest answer would be judged on a
zeroed convolution.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agent.harness import EvalRequest, evaluate
from agent.harness.wall import template
from agent.harness.job import prepare_job, read_result
from agent.harness.runner import run_job
from agent.problems import load_problem
from agent.schema import Verdict
from agent.stages import get_stage

REPO = Path(__file__).resolve().parent.parent
CORRECT = (Path(__file__).parent / "candidates" / "correct.py").read_text()
MARK = "left_by_hostile"

HOSTILE = CORRECT + textwrap.dedent(f'''

    import os, pathlib, subprocess, sys, threading, time, types

    _mean = torch.mean


    def _zero_mean(*args, **kwargs):
        return _mean(*args, **kwargs) * 0


    torch.mean = _zero_mean
    nn.ConvTranspose2d.forward = lambda self, x: torch.zeros_like(x)
    _jit = triton.jit
    triton.jit = lambda *args, **kwargs: _jit(*args, **kwargs)
    torch.{MARK} = torch.full((4,), 7.0)  # a cached tensor in a module's global
    sys.modules["{MARK}"] = types.ModuleType("{MARK}")
    os.environ["{MARK.upper()}"] = "1"
    left = {{}}
    for folder in ("/tmp", "/var/tmp", "/dev/shm", os.environ["HOME"], os.getcwd()):
        try:
            pathlib.Path(folder, "{MARK}").write_text("x")
            left[folder] = True
        except OSError as e:
            left[folder] = str(e)


    def _keep():
        while True:
            torch.mean = _zero_mean
            time.sleep(0.001)


    threading.Thread(target=_keep, name="{MARK}", daemon=True).start()
    _daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)  # {MARK}"],
                               start_new_session=True)
    pathlib.Path("hostile.json").write_text(json.dumps({{"files": left, "daemon": _daemon.pid}}))
''').replace("import os, pathlib", "import json, os, pathlib")


def witness(hostile_workdir: Path) -> str:
    """An honest answer that looks for every leftover at import, writes what it saw, and fails if it saw any."""
    return CORRECT + textwrap.dedent(f'''

        import json, os, pathlib, sys, threading, types

        seen = []
        if not isinstance(torch.mean, types.BuiltinFunctionType):
            seen.append("torch.mean patched")
        if nn.ConvTranspose2d.forward.__module__ != "torch.nn.modules.conv":
            seen.append("ConvTranspose2d.forward patched")
        if triton.jit.__module__ != "triton.runtime.jit":
            seen.append("triton.jit patched")
        if hasattr(torch, "{MARK}"):
            seen.append("a cached tensor")
        if "{MARK}" in sys.modules:
            seen.append("a module in sys.modules")
        if "{MARK.upper()}" in os.environ:
            seen.append("os.environ")
        for folder in ("/tmp", "/var/tmp", "/dev/shm", os.environ["HOME"], os.getcwd(), "{hostile_workdir}"):
            if pathlib.Path(folder, "{MARK}").exists():
                seen.append("a file in " + folder)
        if any(t.name == "{MARK}" for t in threading.enumerate()):
            seen.append("a thread")
        pids = sorted(int(p.name) for p in pathlib.Path("/proc").iterdir() if p.name.isdigit())
        for pid in pids:
            try:
                if b"{MARK}" in pathlib.Path(f"/proc/{{pid}}/cmdline").read_bytes():
                    seen.append("a process")
            except OSError:
                pass
        status = dict(line.split(":", 1) for line in pathlib.Path("/proc/self/status").read_text().splitlines())
        cmdline = pathlib.Path("/proc/self/cmdline").read_bytes().decode().strip("\\0").split("\\0")
        pathlib.Path("witness.json").write_text(json.dumps({{
            "seen": seen, "pids": pids, "uid": status["Uid"].split(), "cmdline": cmdline, "started_as": sys.orig_argv,
            "no_new_privs": status["NoNewPrivs"].strip(), "torch_before_main": "torch" in sys.modules}}))
        if seen:
            raise RuntimeError("left by an earlier candidate: " + ", ".join(seen))
    ''')


@pytest.fixture
def fresh():
    """No template of an earlier test: this one's first worker starts one."""
    template.templates.close()
    yield template.templates
    template.templates.close()


def run(code: str, workdir: Path, device: str = "cpu"):
    """One worker on `code`, without the static checks: (sandbox result, worker result)."""
    problem = load_problem("gap44")
    job = prepare_job(workdir, "evaluate", problem, code=code, device=device, seed=1)
    sb = run_job(workdir, job, device, 180, None, [], None)  # type: ignore[arg-type]
    return sb, read_result(workdir / "result.json")


def _hosts(marker: str) -> list[int]:
    """Processes on this host whose command line holds `marker`."""
    found = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if marker.encode() in (p / "cmdline").read_bytes() and int(p.name) != os.getpid():
                    found.append(int(p.name))
            except OSError:
                pass
    return found


def _leave_then_look(tmp_path: Path, device: str = "cpu") -> dict:
    hostile_sb, _ = run(HOSTILE, tmp_path / "hostile", device)
    left = json.loads((tmp_path / "hostile" / "hostile.json").read_text())
    assert all(v is True for v in left["files"].values()), left  # it did leave a file everywhere it can write
    assert hostile_sb.warm
    assert not _hosts(MARK), "the hostile's detached process outlived its worker"
    forked_from = template.templates.pids()
    sb, res = run(witness(tmp_path / "hostile"), tmp_path / "witness", device)
    assert sb.warm and template.templates.pids() == forked_from  # the hostile's template, not a new one
    seen = json.loads((tmp_path / "witness" / "witness.json").read_text())
    assert seen["seen"] == [], seen
    assert res is not None and res.ok, (res, sb.stderr[-2000:])
    return seen


@pytest.mark.slow
def test_what_a_candidate_leaves_is_not_seen_by_the_next_worker_forked_from_the_template(fresh, tmp_path):
    _leave_then_look(tmp_path)
    first = fresh.pids()
    assert len(first) == 1  # both forked from one template, which ran neither
    honest = evaluate(EvalRequest(source=CORRECT, problem=load_problem("gap44"), stage=get_stage("memory-fusion"),
                                  device="cpu", time_it=False))
    assert honest.verdict == Verdict.CORRECT, honest.message
    assert fresh.pids() == first


@pytest.mark.slow
def test_a_warm_worker_is_forked_behind_its_own_wall_with_torch_already_imported(fresh, tmp_path):
    seen = _leave_then_look(tmp_path)
    assert "agent.harness.wall.forkserver" in seen["started_as"]  # forked from the template, never exec'd afresh
    assert seen["cmdline"] == [sys.executable, "-m", "agent.harness.worker.main", str(tmp_path / "witness" / "job.json")]
    assert seen["torch_before_main"]
    assert seen["uid"] == ["65534"] * 4 and seen["no_new_privs"] == "1"
    assert len(seen["pids"]) <= 3  # its namespace's PID 1 (the reaper), itself, a passing child: nothing else
    assert 1 in seen["pids"]


@pytest.mark.slow
def test_a_template_started_ahead_is_the_one_the_first_worker_forks_from(fresh, tmp_path):
    """agent run starts its workers' template as it builds the evaluator (agent.harness.runner.prestart): the first
    candidate forks from it instead of waiting for torch's import after its own checks (4.6 s of an H200 run's first
    verdict, warm cache)."""
    from agent.harness.runner import prestart

    assert prestart("cpu")
    (ahead,) = fresh.pids()
    assert prestart("cpu") and fresh.pids() == [ahead]  # one per environment
    sb, res = run(CORRECT, tmp_path / "first")
    assert sb.warm and res is not None and res.ok and fresh.pids() == [ahead]


@pytest.mark.slow
def test_warm_starts_can_be_turned_off(fresh, tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_WARM_WORKERS", "0")
    sb, res = run(witness(tmp_path / "none"), tmp_path / "w")
    assert not sb.warm and res is not None and res.ok
    seen = json.loads((tmp_path / "w" / "witness.json").read_text())
    assert "agent.harness.worker.main" in seen["started_as"] and "agent.harness.wall.forkserver" not in seen["started_as"]
    assert fresh.pids() == []
    from agent.harness.runner import prestart

    assert not prestart("cpu") and fresh.pids() == []  # nor started ahead


@pytest.mark.slow
def test_a_template_that_died_is_started_again(fresh, tmp_path):
    sb, _ = run(CORRECT, tmp_path / "a")
    (old,) = fresh.pids()
    os.kill(old, signal.SIGKILL)
    time.sleep(0.2)
    sb, res = run(CORRECT, tmp_path / "b")
    assert sb.warm and res is not None and res.ok
    (new,) = fresh.pids()
    assert new != old


@pytest.mark.slow
def test_a_template_starts_single_threaded_where_the_workers_environment_leaves_the_thread_pools_free(
        fresh, tmp_path, monkeypatch):
    """CUDA mode's environment does not pin OpenMP and BLAS as CPU mode's does: numpy and torch then start a thread
    per core at import (16 on the H200), and a template with threads is refused, so every worker started cold there.
    Reproduced here with CPU mode's pin removed (2 threads at import on 2 cores)."""
    from agent.harness import job, runner

    def unpinned(device):
        env = job.worker_env(device)
        env.pop("OMP_NUM_THREADS", None)
        return env

    monkeypatch.setattr(runner, "worker_env", unpinned)
    sb, res = run(CORRECT, tmp_path / "a")
    assert sb.warm and res is not None and res.ok
    assert len(fresh.pids()) == 1


@pytest.mark.slow
def test_a_template_that_cannot_start_leaves_the_workers_cold(fresh, tmp_path, monkeypatch):
    monkeypatch.setattr(template, "START_S", 0.01)  # no template imports torch that fast
    sb, res = run(CORRECT, tmp_path / "a")
    assert not sb.warm and res is not None and res.ok
    assert fresh.pids() == []


@pytest.mark.slow
@pytest.mark.parametrize("end", ["exit", "sigkill"])
def test_the_template_ends_with_the_process_that_started_it(tmp_path, end):
    """At exit it is closed; a SIGKILLed agent closes its socket, and the template ends with its workers."""
    script = textwrap.dedent(f'''
        import sys, time
        sys.path.insert(0, {str(REPO)!r})
        from pathlib import Path
        from agent.harness.wall import template
        from agent.harness.job import prepare_job
        from agent.harness.runner import run_job
        from agent.problems import load_problem
        job = prepare_job(Path({str(tmp_path / "w")!r}), "evaluate", load_problem("gap44"), code={CORRECT!r},
                          device="cpu", seed=1)
        sb = run_job(job.parent, job, "cpu", 180, None, [], None)
        print(sb.warm, *template.templates.pids(), flush=True)
        if {end!r} == "sigkill":
            time.sleep(600)
    ''')
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    warm, pid = proc.stdout.readline().split()
    assert warm == "True" and Path(f"/proc/{pid}").exists()
    if end == "sigkill":
        proc.kill()
    proc.wait(timeout=300)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists() or b"forkserver" not in Path(f"/proc/{pid}/cmdline").read_bytes()


@pytest.mark.slow
def test_the_user_namespace_wall_forks_warm_workers_too(tmp_path):
    """Inside a user namespace of our own, uid 65534 is not mapped: sandbox.probe falls to the user-namespaces wall,
    and the template forks its workers into nested user namespaces."""
    script = textwrap.dedent(f'''
        import json, sys
        sys.path.insert(0, {str(REPO)!r})
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from pathlib import Path
        import test_warm_workers as t
        from agent.harness.wall.sandbox import isolation
        seen = t._leave_then_look(Path({str(tmp_path)!r}))
        print(json.dumps({{"wall": isolation(), "seen": seen}}))
    ''')
    out = subprocess.run(["unshare", "--user", "--map-root-user", sys.executable, "-c", script], capture_output=True,
                         text=True, timeout=400)
    assert out.returncode == 0, out.stderr[-3000:]
    said = json.loads(out.stdout.strip().splitlines()[-1])
    assert said["wall"] == "user-namespaces"
    assert "agent.harness.wall.forkserver" in said["seen"]["started_as"] and said["seen"]["no_new_privs"] == "1"


@pytest.mark.gpu
def test_on_the_gpu_each_worker_initialises_cuda_itself_and_sees_nothing_left(fresh, tmp_path):
    _leave_then_look(tmp_path, "cuda")
    honest = evaluate(EvalRequest(source=CORRECT, problem=load_problem("gap44"), stage=get_stage("memory-fusion"),
                                  device="cuda", time_it=True))
    assert honest.verdict == Verdict.CORRECT, honest.message

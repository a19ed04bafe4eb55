"""agent.harness.wall.sandbox: isolation and limits for any command (real subprocesses)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from agent.harness.wall.sandbox import clean_env, isolation, run_sandboxed

PY = sys.executable
namespaces = pytest.mark.skipif(isolation() == "none", reason="unshare is refused on this machine")


def py(code: str, workdir: Path, **kw):
    return run_sandboxed([PY, "-c", code], workdir=workdir, timeout_s=kw.pop("timeout_s", 30), **kw)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_runs_in_workdir_with_home_inside_it(tmp_path):
    r = py("import os; print(os.getcwd()); print(os.environ['HOME'])", tmp_path)
    assert r.ok, r.stderr
    cwd, home = r.stdout.split()
    assert Path(cwd) == tmp_path.resolve() and Path(home).is_relative_to(tmp_path.resolve())


def test_environment_has_no_secrets(tmp_path, monkeypatch):
    for name in ("OPENAI_API_KEY", "GITHUB_TOKEN", "MY_SECRET", "SOME_PASSWORD", "AWS_ACCESS_KEY_ID", "UNRELATED_VAR"):
        monkeypatch.setenv(name, "leak")
    monkeypatch.setenv("TRITON_CACHE_DIR_X", "kept")
    r = py("import os, json; print(json.dumps(dict(os.environ)))", tmp_path, env={"EXTRA_TOKEN": "leak", "FOO": "bar"})
    assert "leak" not in r.stdout
    import json

    env = json.loads(r.stdout)
    assert env["FOO"] == "bar" and env["TRITON_CACHE_DIR_X"] == "kept" and "PATH" in env
    assert "OPENAI_API_KEY" not in clean_env()


def _marker_code(marker: Path, delay_s: float, detach: bool) -> str:
    """A child that writes `marker` after `delay_s` (detached: a double-forked setsid daemon)."""
    sh = f"sleep {delay_s}; echo alive > {marker}"
    argv = ["setsid", "sh", "-c", sh] if detach else ["sh", "-c", sh]
    return f"import subprocess; subprocess.Popen({argv!r}, start_new_session={detach})"


def test_timeout_kills_everything_the_command_started(tmp_path):
    marker = tmp_path / "late.txt"
    start = time.monotonic()
    r = py(_marker_code(marker, 3, detach=False) + "; import time; time.sleep(60)", tmp_path, timeout_s=1.5)
    assert r.timed_out and r.killed == "timeout" and time.monotonic() - start < 10
    time.sleep(4)
    assert not marker.exists()


def test_a_deadline_armed_after_the_start_ends_the_command(tmp_path):
    import threading

    from agent.harness.wall.sandbox import Deadline

    deadline = Deadline()
    threading.Timer(1.0, lambda: deadline.arm(0.5)).start()  # the limit starts a second in, for half a second
    t0 = time.monotonic()
    res = run_sandboxed([sys.executable, "-c", "import time; time.sleep(60)"], workdir=tmp_path, timeout_s=120,
                        deadline=deadline)
    assert res.timed_out and 1.4 < time.monotonic() - t0 < 10


def test_a_detached_daemon_dies_with_the_command(tmp_path):
    marker = tmp_path / "daemon.txt"
    r = py(_marker_code(marker, 2, detach=True), tmp_path)
    assert r.returncode == 0, r.stderr
    time.sleep(3)
    assert not marker.exists()


def test_reports_the_signal_that_killed_the_command(tmp_path):
    r = py("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", tmp_path)
    assert r.signal == "SIGSEGV" and not r.ok


def test_output_limit_kills_a_flood(tmp_path):
    r = py("while True: print('x' * 1000)", tmp_path, output_limit_bytes=100_000)
    assert r.killed == "output" and not r.ok
    assert len(r.stdout) <= 64 * 1024 + 1024


def test_resident_memory_is_polled(tmp_path):
    r = py("import time; b = bytearray(400 << 20); time.sleep(20)", tmp_path, memory_mb=150, timeout_s=20)
    assert r.killed == "memory" and r.wall_s < 15


def test_address_space_limit_in_cpu_mode(tmp_path):
    r = py("b = bytearray(2 << 30)", tmp_path, memory_mb=512, address_space_limit=True)
    assert r.returncode != 0 and "MemoryError" in r.stderr


def test_file_size_limit(tmp_path):
    r = py("open('big', 'wb').write(b'x' * (3 << 20))", tmp_path, file_limit_mb=1)
    assert r.returncode != 0
    assert (tmp_path / "big").stat().st_size <= 1 << 20


@namespaces
def test_private_tmp_and_the_workdir_stays_visible(tmp_path):
    marker = Path("/tmp") / f"agent-sandbox-test-{os.getpid()}"
    (tmp_path / "input.txt").write_text("hello")
    r = py(f"import os; open({str(marker)!r}, 'w').write('x'); print(sorted(os.listdir('/tmp')));"
           " print(open('input.txt').read()); open('output.txt', 'w').write('bye')", tmp_path)
    assert r.ok, r.stderr
    assert not marker.exists()  # /tmp inside was a private tmpfs
    assert "hello" in r.stdout and (tmp_path / "output.txt").read_text() == "bye"


@namespaces
def test_runs_unprivileged_seeing_only_its_own_processes(tmp_path):
    r = py("import os; print(os.getpid(), os.geteuid(), sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))",
           tmp_path)
    assert r.ok, r.stderr
    pid, euid, procs = r.stdout.split(maxsplit=2)
    assert euid != "0" and procs.strip() == f"[1, {pid}]"  # the namespace's init and the command


@namespaces
def test_the_parents_environment_is_out_of_reach(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-sandbox-test-0123456789")
    code = ("import os\nfor p in os.listdir('/proc'):\n    try:\n        print(open(f'/proc/{p}/environ').read())\n"
            "    except OSError:\n        pass\nprint(os.environ)")
    r = py(code, tmp_path)
    assert r.ok, r.stderr
    assert "sk-sandbox-test" not in r.stdout + r.stderr


@namespaces
def test_everything_outside_the_workdir_is_read_only(tmp_path):
    import agent

    targets = ["/etc/passwd", str(Path(agent.__file__)), os.path.join(sys.prefix, "agent-sandbox-probe"),
               str(Path.home() / "agent-sandbox-probe"), "/usr/agent-sandbox-probe"]
    code = (f"import os\nfor t in {targets!r}:\n    try:\n        open(t, 'a').write('x')\n        print('WROTE', t)\n"
            "    except OSError as e:\n        print('refused', t)\nopen('mine.txt', 'w').write('ok')")
    r = py(code, tmp_path)
    assert r.ok, r.stderr
    assert "WROTE" not in r.stdout and r.stdout.count("refused") == len(targets)
    assert (tmp_path / "mine.txt").read_text() == "ok"
    assert not (Path.home() / "agent-sandbox-probe").exists()


@namespaces
def test_home_the_working_directory_and_hidden_paths_are_masked(tmp_path, monkeypatch):
    home, store, work = tmp_path / "home", tmp_path / "store", tmp_path / "work"
    for d in (home, store, work):
        d.mkdir()
    (home / ".netrc").write_text("password hunter2")
    (store / "run.json").write_text("{}")
    monkeypatch.setenv("HOME", str(home))
    code = (f"import os\nfor d in {[str(home), str(store), os.getcwd()]!r}:\n    print(sorted(os.listdir(d)) "
            "if os.path.isdir(d) else 'absent')")
    r = run_sandboxed([PY, "-c", code], workdir=work, timeout_s=30, hide=[store])
    assert r.ok, r.stderr
    assert ".netrc" not in r.stdout and "run.json" not in r.stdout and "candidates" not in r.stdout


@namespaces
def test_no_network(tmp_path):
    r = py("import socket\ntry:\n    socket.create_connection(('1.1.1.1', 53), timeout=3)\n    print('connected')\n"
           "except OSError as e:\n    print('blocked', e)", tmp_path)
    assert "blocked" in r.stdout


def test_a_missing_command_is_a_result_not_an_exception(tmp_path):
    r = run_sandboxed(["definitely-not-a-command-xyz"], workdir=tmp_path, timeout_s=10)
    assert not r.ok


@namespaces
def test_an_import_folder_stays_whole_but_a_store_inside_it_is_masked(tmp_path, monkeypatch):
    site = tmp_path / "site"  # a `pip install --target` folder on the path, the user's store inside it
    (site / "mypkg").mkdir(parents=True)
    (site / "mypkg" / "__init__.py").write_text("VALUE = 42\n")
    (site / "mypkg-1.0.dist-info").mkdir()
    (site / "candidates").mkdir()
    (site / "candidates" / "run.json").write_text("{}")
    monkeypatch.syspath_prepend(str(site))
    code = (f"import os, sys\nsys.path.insert(0, {str(site)!r})\nimport mypkg\n"
            f"print(mypkg.VALUE, sorted(os.listdir({str(site)!r})), os.listdir({str(site / 'candidates')!r}))")
    r = py(code, tmp_path / "work", hide=[site / "candidates"])
    assert r.ok, r.stderr
    assert r.stdout.split()[0] == "42" and "mypkg-1.0.dist-info" in r.stdout and "run.json" not in r.stdout


@namespaces
def test_a_package_linked_into_an_import_folder_from_a_masked_place_is_reachable(tmp_path, monkeypatch):
    home, view = tmp_path / "home", tmp_path / "view"  # a Spack/Nix-style view: packages linked in from a store
    (home / "store" / "linked").mkdir(parents=True)
    (home / "store" / "linked" / "__init__.py").write_text("VALUE = 7\n")
    (home / "secret.txt").write_text("hunter2")
    view.mkdir()
    (view / "linked").symlink_to(home / "store" / "linked")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.syspath_prepend(str(view))
    code = (f"import os, sys\nsys.path.insert(0, {str(view)!r})\nimport linked\n"
            f"print(linked.VALUE, os.listdir({str(home)!r}))")
    r = py(code, tmp_path / "work")
    assert r.ok, r.stderr
    assert r.stdout.split()[0] == "7" and "secret.txt" not in r.stdout


def test_a_compile_cache_this_process_sets_for_itself_reaches_no_worker_nor_the_templates_key():
    # torch sets TORCHINDUCTOR_CACHE_DIR in os.environ when this process first imports torch._dynamo (the offline
    # proposer's fx trace does): passed on, every later worker's environment changed, and with it the key of the warm
    # template they fork from (a second template, seconds, mid-run). A worker's caches are its own (HOME, /tmp).
    import subprocess
    import sys

    code = ("import os\nfrom agent.harness.job import worker_env\nfrom agent.harness.wall.sandbox import _command_env\n"
            "before = _command_env(worker_env('cpu'))\nimport torch._dynamo  # noqa: F401\n"
            "os.environ['TRITON_CACHE_DIR'] = '/home/me/.triton/cache'\n"
            "print('TORCHINDUCTOR_CACHE_DIR' in os.environ, _command_env(worker_env('cpu')) == before)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.split() == ["True", "True"], r.stderr[-2000:]

"""The project installed for real in each way people install Python packages (a wheel built from this checkout,
installed by pip): each judges a correct answer as correct, and the wall around its candidates still hides what it
hid (HOME's other files, the store, the working directory, a checkout's files that are not the package).

The dependencies (torch, Triton, ... several GB) are not downloaded again for each mode: they are hard-linked from
where this interpreter has them into the mode's own folder, so that they are found only the way that mode finds
them. The interpreter of the --target and --user modes is another Python of the same version that has none of them
(Debian's, where the machine has one)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from agent.harness.wall.sandbox import isolation

pytestmark = [pytest.mark.slow, pytest.mark.skipif(isolation() == "none", reason="unshare is refused on this machine")]

REPO = Path(__file__).resolve().parent.parent
CORRECT = Path(__file__).resolve().parent / "candidates" / "correct.py"
DEPS = Path(torch.__file__).resolve().parent.parent  # the folder this interpreter's dependencies were installed into
VERSION = f"python{sys.version_info.major}.{sys.version_info.minor}"
SECRET = "hunter2-install-modes"


def _bare_python() -> str | None:
    """Another interpreter of our version that cannot import torch (nothing installed for it), or None."""
    for cand in (f"/usr/bin/{VERSION}", f"/usr/local/bin/{VERSION}"):
        if Path(cand).exists() and Path(cand).resolve() != Path(sys.executable).resolve():
            r = subprocess.run([cand, "-s", "-c", "import torch"], capture_output=True, env={"PATH": "/usr/bin:/bin"})
            if r.returncode != 0:
                return cand
    return None


BARE = _bare_python()
needs_bare = pytest.mark.skipif(BARE is None, reason=f"no second {VERSION} without torch on this machine")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out),
                        str(REPO)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return next(out.glob("agent-*.whl"))


def _pip(*args: str, python: str | None = None, env: dict[str, str] | None = None) -> None:
    """pip install, as the user would run it (`python`: into that interpreter's environment)."""
    where = ["--python", python] if python else []
    r = subprocess.run([sys.executable, "-m", "pip", *where, "-q", "--disable-pip-version-check", "install", *args],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr


def _link_dependencies(into: Path) -> None:
    """Every package beside torch, but our own, hard-linked into `into` (a site folder of the mode's)."""
    into.mkdir(parents=True, exist_ok=True)
    for entry in DEPS.iterdir():
        name = entry.name
        if name == "agent" or name.startswith(("agent-", "__editable__", "_editable_impl_agent")) or name in (
                "__pycache__",) or (into / name).exists():
            continue
        try:
            if entry.is_dir() and not entry.is_symlink():
                shutil.copytree(entry, into / name, copy_function=os.link, symlinks=True)
            else:
                os.link(entry, into / name, follow_symlinks=False)
        except OSError as e:  # another file system: the test cannot lay the mode out without copying GBs
            pytest.skip(f"cannot hard-link the dependencies into {into}: {e}")


def _venv(path: Path) -> Path:
    """A venv that sees nothing of this interpreter's packages; returns its site-packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    return path / "lib" / VERSION / "site-packages"


class Mode:
    """One installed agent: the interpreter that runs it and the environment it needs (HOME is the user's)."""

    def __init__(self, python: str, home: Path, **env: str) -> None:
        self.python = python
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
                    "NO_COLOR": "1", "COLUMNS": "200", **env}

    def run(self, *args: str, cwd: Path) -> subprocess.CompletedProcess:
        return subprocess.run([self.python, *args], capture_output=True, text=True, cwd=cwd, env=self.env, timeout=600)


@pytest.fixture
def user(tmp_path) -> tuple[Path, Path]:
    """A user's HOME with a secret in it, and the folder they work in."""
    home, cwd = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    cwd.mkdir()
    (home / ".netrc").write_text(f"password {SECRET}")
    (cwd / "notes.txt").write_text(SECRET)
    return home, cwd


# The wall, asked from inside the installed agent: what a command behind it sees of HOME, the store, the working
# directory and a checkout, and whether torch and Triton import there.
_WALL = """
import json, os, sys, tempfile
from pathlib import Path
from agent.harness.wall.sandbox import run_sandboxed
from agent.harness.job import worker_env
home, store, cwd, extra = sys.argv[1], sys.argv[2], os.getcwd(), sys.argv[3:]
Path(store).mkdir(exist_ok=True); (Path(store) / "run.json").write_text("{}")
code = '''
import json, os, sys
def seen(d):
    try:
        return sorted(os.listdir(d))
    except OSError as e:
        return str(e)
import torch, triton, agent
print(json.dumps({"home": seen(sys.argv[1]), "store": seen(sys.argv[2]), "cwd": seen(sys.argv[3]),
                  "extra": [seen(d) for d in sys.argv[4:]], "agent": agent.__file__}))
'''
r = run_sandboxed([sys.executable, "-c", code, home, store, cwd, *extra], workdir=Path(tempfile.mkdtemp()),
                  timeout_s=120, env=worker_env("cpu"), hide=[Path(store)])
print(r.stdout if r.ok else "FAILED " + r.stderr[-2000:])
"""


def _judge_and_wall(mode: Mode, home: Path, cwd: Path, *extra: Path) -> dict:
    """`agent eval` of a correct answer (exit 0, correct) and what the wall shows a command of this mode."""
    r = mode.run("-m", "agent", "eval", str(CORRECT), "--device", "cpu", "--no-timing", cwd=cwd)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "correct" in r.stdout
    w = mode.run("-c", _WALL, str(home), str(cwd / "candidates"), *map(str, extra), cwd=cwd)
    assert w.returncode == 0 and not w.stdout.startswith("FAILED"), w.stdout + w.stderr
    seen = json.loads(w.stdout.strip().splitlines()[-1])
    assert ".netrc" not in json.dumps(seen["home"]) and "run.json" not in json.dumps(seen["store"])
    assert "notes.txt" not in json.dumps(seen["cwd"])
    return seen


def test_venv_with_the_wheel_installed(tmp_path, wheel, user):
    home, cwd = user
    site = _venv(tmp_path / "venv")
    _pip("--no-deps", "--no-index", str(wheel), python=str(tmp_path / "venv" / "bin" / "python"))
    _link_dependencies(site)
    seen = _judge_and_wall(Mode(str(tmp_path / "venv" / "bin" / "python"), home), home, cwd)
    assert seen["agent"].startswith(str(site))


def test_venv_with_an_editable_install_shows_only_the_package_of_the_checkout(tmp_path, user):
    home, cwd = user
    checkout = tmp_path / "checkout"
    shutil.copytree(REPO, checkout, ignore=shutil.ignore_patterns(".git", "candidates", "profiles", "bench", "docs",
                                                                   "__pycache__", "*.egg-info"))
    (checkout / "candidates").mkdir()
    (checkout / "candidates" / "index.sqlite").write_text(SECRET)
    site = _venv(tmp_path / "venv")
    _link_dependencies(site)
    python = str(tmp_path / "venv" / "bin" / "python")
    _pip("--no-deps", "--no-index", "--no-build-isolation", "-e", str(checkout), python=python)
    seen = _judge_and_wall(Mode(python, home), home, cwd, checkout, checkout / "candidates")
    assert seen["agent"].startswith(str(checkout / "agent"))
    assert seen["extra"][0] == ["agent"], seen["extra"]  # README, tests, pyproject: masked; the package bound back
    assert SECRET not in json.dumps(seen["extra"][1])


@needs_bare
def test_pip_install_target_on_pythonpath(tmp_path, wheel, user):
    home, cwd = user
    target = tmp_path / "target"
    _pip("--no-deps", "--no-index", "--target", str(target), str(wheel))
    _link_dependencies(target)
    assert BARE is not None
    seen = _judge_and_wall(Mode(BARE, home, PYTHONPATH=str(target)), home, cwd)
    assert seen["agent"].startswith(str(target))


@needs_bare
def test_pip_install_user_under_home(tmp_path, wheel, user):
    home, cwd = user
    _pip("--no-deps", "--no-index", "--user", "--no-warn-script-location", str(wheel),
         env={**os.environ, "HOME": str(home), "PYTHONUSERBASE": str(home / ".local")})
    user_site = home / ".local" / "lib" / VERSION / "site-packages"
    _link_dependencies(user_site)
    assert BARE is not None
    seen = _judge_and_wall(Mode(BARE, home), home, cwd)
    assert seen["agent"].startswith(str(user_site))
    assert seen["home"] == [".local"], seen["home"]  # HOME's own files masked, the user site bound back


def test_a_site_folder_outside_the_prefix_named_by_a_pth_file(tmp_path, wheel, user):
    home, cwd = user
    shared = home / "modules" / "site-packages"  # a cluster's module folder, say: outside sys.prefix, under HOME
    _link_dependencies(shared)
    site = _venv(tmp_path / "venv")
    (site / "cluster.pth").write_text(f"{shared}\n")
    python = str(tmp_path / "venv" / "bin" / "python")
    _pip("--no-deps", "--no-index", str(wheel), python=python)
    seen = _judge_and_wall(Mode(python, home), home, cwd)
    assert seen["home"] == ["modules"], seen["home"]


@needs_bare
def test_a_dependency_the_worker_cannot_import_is_the_harnesss_error_not_the_answers(tmp_path, wheel, user):
    home, cwd = user
    target = tmp_path / "target"
    _pip("--no-deps", "--no-index", "--target", str(target), str(wheel))
    _link_dependencies(target)
    for p in target.glob("triton*"):  # Triton: the parent's checks never import it, every worker does
        shutil.rmtree(p)
    assert BARE is not None
    r = Mode(BARE, home, PYTHONPATH=str(target)).run("-m", "agent", "eval", str(CORRECT), "--device", "cpu",
                                                     "--no-timing", cwd=cwd)
    assert r.returncode == 1, r.stdout + r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert "the sandboxed worker cannot import triton" in line and str(target) in line, line
    assert "Traceback" not in r.stderr and "check the problem file" not in r.stderr


@pytest.fixture(scope="module")
def triton36(tmp_path_factory) -> tuple[Path, Path]:
    """Triton 3.6 (an older interpreter: its memory operations take other arguments) and NumPy 2.2, each in a
    folder of its own to put first on PYTHONPATH."""
    triton_dir, numpy_dir = tmp_path_factory.mktemp("triton36"), tmp_path_factory.mktemp("numpy22")
    for d in (triton_dir, numpy_dir):
        d.chmod(0o755)  # as pip leaves a --target folder it makes (mktemp's are 0700: the sandbox's uid reads none)
    for spec, where in (("triton==3.6.0", triton_dir), ("numpy==2.2.6", numpy_dir)):
        r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                            "--only-binary=:all:", "--target", str(where), spec], capture_output=True, text=True,
                           timeout=600)
        if r.returncode != 0:
            pytest.skip(f"cannot install {spec} from the package index: {r.stderr.strip().splitlines()[-1:]}")
    return triton_dir, numpy_dir


def test_cpu_mode_judges_under_an_older_triton_and_names_an_interpreter_that_cannot_run(tmp_path, triton36):
    """The harness's interpreter hooks read arguments by name (Triton 3.6's differ from 3.9's); where the installed
    Triton's interpreter cannot run a plain kernel at all (3.6 under NumPy 2.4), the run says so in one line, exit 1,
    instead of judging every answer a runtime_error."""
    triton_dir, numpy_dir = triton36
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "NO_COLOR": "1", "COLUMNS": "200"}

    def judge(*path: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "agent", "eval", str(CORRECT), "--device", "cpu", "--no-timing"],
                              capture_output=True, text=True, cwd=REPO, timeout=600,
                              env={**env, "PYTHONPATH": os.pathsep.join(map(str, path))})

    ok = judge(triton_dir, numpy_dir)
    assert ok.returncode == 0 and "correct on" in ok.stdout, ok.stdout[-2000:] + ok.stderr[-2000:]
    import numpy

    if tuple(int(p) for p in numpy.__version__.split(".")[:2]) >= (2, 4):
        broken = judge(triton_dir)
        assert broken.returncode == 1, broken.stdout[-2000:] + broken.stderr[-2000:]
        line = broken.stderr.strip().splitlines()[-1]
        assert "Triton 3.6.0's interpreter cannot run a kernel here under NumPy" in line and "Traceback" not in line


def test_home_on_pythonpath_shows_its_modules_and_packages_not_its_other_files(tmp_path, wheel, user):
    """A user who keeps helpers in HOME and puts HOME on PYTHONPATH: behind the wall the modules and packages there
    import, and HOME's keys, notes and data folders stay masked (before: an import folder that is no site folder was
    bound back whole)."""
    home, cwd = user
    (home / "myhelpers.py").write_text("X = 1\n")
    (home / "mylib").mkdir()
    (home / "mylib" / "__init__.py").write_text("")
    (home / "data").mkdir()
    (home / "data" / "secret.txt").write_text(SECRET)
    (home / "notes.txt").write_text(SECRET)
    site = _venv(tmp_path / "venv")
    _pip("--no-deps", "--no-index", str(wheel), python=str(tmp_path / "venv" / "bin" / "python"))
    _link_dependencies(site)
    seen = _judge_and_wall(Mode(str(tmp_path / "venv" / "bin" / "python"), home, PYTHONPATH=str(home)), home, cwd)
    assert seen["home"] == ["myhelpers.py", "mylib"], seen["home"]

"""What the wall shows of the file system (agent.harness.wall.sandbox builds the wall from it): the folders the
interpreter imports from, kept; everything a user keeps (scratch space, homes, the agent's own places), masked."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.harness.wall.spec import Isolation

log = logging.getLogger(__name__)

# Never masked, even when HOME or the working directory is one of them: the system itself lives there.
_SYSTEM = ("/", "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/opt", "/proc", "/sys", "/dev", "/var", "/run")


def under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def is_site_folder(path: Path) -> bool:
    """A folder pip installed distributions into (it holds their *.dist-info records): a venv's or the system's
    site-packages, a `pip install --target` or `--user` folder. A source checkout never holds one."""
    try:
        return any(p.suffix == ".dist-info" and p.is_dir() for p in path.iterdir())
    except OSError:
        return False


def import_folders() -> list[Path]:
    """Every folder the interpreter imports from: sys.path as site built it (PYTHONPATH, the site folders, what
    their .pth files add, the user site) and the folder that holds the `agent` package (a setuptools-style editable
    finder puts it on no path)."""
    import agent

    found: list[Path] = []
    for entry in [str(Path(agent.__file__).resolve().parent.parent), *sys.path,
                  *os.environ.get("PYTHONPATH", "").split(os.pathsep)]:
        if entry:
            # both names: the real folder, and the name the path uses where a symbolic link leads there (a .pth
            # or PYTHONPATH naming /tmp/link/site: behind the wall the link itself is masked away)
            for path in (Path(entry).resolve(), Path(os.path.abspath(entry))):
                if path not in found and path.is_dir():
                    found.append(path)
    return found


def import_paths() -> list[Path]:
    """What the worker must see to import what the user installed, however it was installed: the prefixes, and every
    site folder (one holding install records) whole; of any other import folder (HOME or a projects folder on
    PYTHONPATH) only what an import can load. A source checkout (the folder holding the `agent` package without an
    install record of it: an editable install, or a checkout on PYTHONPATH) contributes only its `agent` package,
    its store (candidates/, profiles/) and the rest staying masked; our working directory is the worker's own
    business unless packages were installed into it."""
    import agent

    package = Path(agent.__file__).resolve().parent
    checkout = package.parent
    cwd = Path.cwd().resolve()
    found = [package, Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), Path(sys.executable).resolve().parent]
    for path in import_folders():
        if is_site_folder(path):
            found += [path, *_linked_out(path)]
        elif path not in (checkout, cwd):
            # a folder of the user's own on PYTHONPATH (HOME itself, a projects folder): what Python can import
            # from it, not the notes, keys and data files beside the modules
            found += _importable(path)
    return [p for p in dict.fromkeys(found) if p.exists()]


def _importable(folder: Path) -> list[Path]:
    """A plain folder's entries that an import can load: modules and packages (a folder named as an identifier that
    holds Python code), with where their links lead."""
    out = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []
    for e in entries:
        try:
            if e.is_file() and (e.suffix in (".py", ".pyc") or e.name.endswith((".so", ".pyd"))) and \
                    e.name.split(".")[0].isidentifier():
                out.append(e)
            elif e.is_dir() and e.name.isidentifier() and any(
                    c.suffix == ".py" or c.name.endswith(".so") for c in e.iterdir()):
                out.append(e)
            else:
                continue
            if e.is_symlink():
                out.append(e.resolve())
        except OSError:
            continue
    return out


def _linked_out(folder: Path) -> list[Path]:
    """Where the symbolic links among a folder's entries lead, when outside it: a Spack or Nix view links each
    package into its site folder from a store that may lie under a masked HOME."""
    out = []
    try:
        for entry in folder.iterdir():
            if entry.is_symlink():
                target = entry.resolve()
                if target.exists() and not under(target, folder):
                    out.append(target)
    except OSError:
        pass
    return out


def masked(hide: Sequence[Path]) -> list[Path]:
    """Directories replaced by an empty tmpfs: scratch space every user shares, homes, the agent's own places."""
    import agent

    home = Path(os.environ.get("HOME") or "/root")
    candidates = [Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"), Path("/run/user"), Path("/run/secrets"),
                  Path("/root"), Path("/home"), home, Path.cwd(), Path(agent.__file__).resolve().parent.parent,
                  *hide]
    out: list[Path] = []
    for c in candidates:
        try:
            c = c.resolve()
        except OSError:
            continue
        if c.is_dir() and str(c) not in _SYSTEM and not any(under(Path(s), c) for s in _SYSTEM if s != "/"):
            if c not in out:
                out.append(c)
    return sorted(out, key=lambda p: len(p.parts))


@lru_cache(maxsize=8)
def warn_unreadable(folders: tuple[Path, ...], uid: int) -> None:
    """An import folder the worker's uid cannot read (a 0700 folder of root's: umask 077, a mkdtemp) is as good as
    absent behind the wall: the worker imports that package from elsewhere, or not at all. Said once per process."""
    for folder in folders:
        try:
            st = folder.stat()
        except OSError:
            continue
        if st.st_uid != uid and not st.st_mode & 0o005:
            log.warning("the sandbox's uid %d cannot read the import folder %s (mode %o): its workers will not import "
                        "from it (chmod o+rx it)", uid, folder, st.st_mode & 0o777)


def closed_ancestors(paths: list[Path], iso: Isolation) -> list[Path]:
    """Directories above a kept path that the unprivileged uid cannot traverse (a 0700 home or mkdtemp): masked too,
    so that the kept paths are bound back under a tmpfs it can walk through."""
    if iso.uid is None:
        return []
    found = []
    for p in paths:
        for a in reversed(p.parents):
            try:
                if not a.stat().st_mode & 0o001:
                    found.append(a)
                    break
            except OSError:
                break
    return found

"""Where the store is, for every command that reads or writes it: the one place `--root` is resolved.

In order: `--root DIR`; the configured `store.root` (AGENT_STORE__ROOT, else the config file); else, as git finds
its repository, the nearest folder at or above the working directory that holds a store (a `candidates/` with an
index or a recorded run); else the working directory, where a run creates a new store. Settings the user wrote
win over what is found, as a flag wins over the environment and the environment over the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agent.errors import UserError


@dataclass(frozen=True)
class StoreRoot:
    """The folder that holds (or will hold) candidates/ and profiles/, and why it was chosen."""

    path: Path
    source: str  # "--root", "AGENT_STORE__ROOT", "config FILE", "found", "working directory"

    def describe(self) -> str:
        if self.source == "found":
            return "the nearest folder at or above the working directory that holds a store"
        if self.source == "working directory":
            return "no store here or in any folder above, none configured: a run creates one here"
        return self.source


def find_store(start: Path) -> Path | None:
    """The nearest folder at or above `start` holding a store (its `candidates/` has an index or a run)."""
    from agent.store import Store

    for folder in (start, *start.parents):
        try:
            if Store(folder).exists():
                return folder
        except OSError:  # a folder this user may not list: not a store of theirs, go on up
            continue
    return None


def resolve_root(flag: Path | None, configured: Path | None, configured_from: str,
                 cwd: Path | None = None) -> StoreRoot:
    """The store's folder: the flag, the configured one, the nearest found, else `cwd`; one line for a file."""
    if flag is not None:
        root = StoreRoot(Path(flag).expanduser(), "--root")
    elif configured is not None:
        root = StoreRoot(configured.expanduser(), configured_from)
    else:
        cwd = cwd or _working_directory()
        found = find_store(cwd)
        root = StoreRoot(found, "found") if found is not None else StoreRoot(cwd, "working directory")
    if root.path.exists() and not root.path.is_dir():
        where = "--root" if root.source == "--root" else f"store.root ({root.source})"
        raise UserError(f"{where} {root.path}: not a directory",
                        "a store is a folder that holds candidates/ and profiles/; name the folder, not a file in it")
    return root


def _working_directory() -> Path:
    try:
        return Path.cwd()
    except OSError as e:  # deleted under the shell: nothing to search from
        raise UserError(f"the working directory is gone ({e.strerror or e})",
                        "cd somewhere, or give --root DIR") from None

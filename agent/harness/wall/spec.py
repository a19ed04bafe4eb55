"""What contain.py builds around one command, as data: the wall's kind on this machine (Isolation) and the spec of
masks, kept paths, limits and uid (contain_spec). Shared by the cold path (agent.harness.wall.sandbox) and the warm
one (agent.harness.wall.template), which therefore depend on it and not on each other."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent.harness.settings import settings
from agent.harness.wall.view import closed_ancestors, import_paths, masked, under, warn_unreadable

log = logging.getLogger(__name__)

# Left writable at the mount level: the namespace's own /proc (CUDA's driver writes there: on an H100, cuInit fails
# with error 304 under a read-only /proc); its files' permissions keep the unprivileged uid to its own process's.
_EXEMPT = ("/proc",)
# Masked, but left writable: every user's scratch space, private to the namespace and gone with it.
_SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")

@dataclass(frozen=True)
class Isolation:
    """What this machine lets us build: unshare flags, and the uid a command is dropped to (None: none mapped)."""

    kind: str
    unshare: list[str] = field(default_factory=list)
    uid: int | None = None



def contain_spec(workdir: Path, iso: Isolation, limits: dict[str, int], hide: Sequence[Path] = (),
                 expose: Sequence[Path] = ()) -> dict:
    """What contain.py builds for one command: masks with the paths kept under each, the writable workdir,
    limits and the uid. Staging directories for the masks are created here, inside the workdir."""
    limits = dict(limits)
    if not iso.unshare:
        return {"namespaces": False, "cwd": str(workdir), "limits": limits, "uid": iso.uid, "gid": iso.uid}
    imports = import_paths()
    keep_all = [workdir, *expose, *imports]
    if iso.uid is not None:
        warn_unreadable(tuple(imports), iso.uid)
    masks: list[Path] = []
    for m in masked([*hide, *closed_ancestors(keep_all, iso)]):  # outermost first
        if m in keep_all:
            log.debug("not masking %s: the worker needs it", m)
        elif any(under(m, k) for k in keep_all) or not any(under(m, o) for o in masks):
            # inside a kept import folder (a store in a --target folder) it is masked over the folder's bind; inside
            # another mask and no kept path it is hidden already
            masks.append(m)
    pairs: list[tuple[str, list[str], bool]] = []
    for m in masks:
        kept = sorted({p for p in keep_all if under(p, m)}, key=lambda p: len(p.parts))
        firsts: list[Path] = []
        for p in kept:
            if not any(under(p, o) for o in firsts):
                firsts.append(p)
        pairs.append((str(m), [str(p) for p in firsts], str(m) in _SCRATCH))
    stage_root = workdir / ".ns"
    stages = []
    for i in range(len(pairs)):
        d = stage_root / str(i)
        d.mkdir(parents=True, exist_ok=True)
        stages.append(str(d))
    return {"namespaces": True, "masks": pairs, "stages": stages, "writable": [str(workdir)], "exempt": list(_EXEMPT),
            "tmpfs_mb": settings().sandbox.tmpfs_mb, "cwd": str(workdir), "limits": limits,
            "uid": iso.uid, "gid": iso.uid}

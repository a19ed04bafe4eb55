"""The wall around a candidate: run as PID 1 of fresh PID, mount and network namespaces, lock the view of the
file system, drop every privilege, set limits, then exec the real command.

    unshare [--user --map-root-user] --pid --fork --kill-child=SIGKILL --mount-proc --mount --net -- \
        python -I -S contain.py SPEC_JSON -- COMMAND...

Standard library only, and started with `-I -S` (no site-packages, no environment variables read): it must run
before anything of ours or of the candidate's is imported. Steps, in this order, because each needs the one before:

1. every existing mount becomes read-only (one recursive mount_setattr; older kernels: one remount per mount), but
   the namespace's own /proc, which CUDA writes to (its files' permissions still apply);
2. each "mask" directory (/tmp, HOME, the store, ...) is replaced by an empty tmpfs into which the "keep" paths
   under it (the workdir, the interpreter, import paths) are bind-mounted back, read-only except the workdir;
3. loopback comes up (ncu talks to its target over 127.0.0.1); there is no other interface;
4. limits (core dumps off, file size, CPU time, address space, processes, open files);
5. privileges go: as real root, setuid/setgid to an unprivileged uid (65534); in a user namespace, where only one
   uid is mapped, the capability bounding set is emptied and securebits make uid 0 gain nothing at exec;
   no_new_privs either way, so no set-uid binary can give any back;
6. fork and exec the command, staying as PID 1 of the namespace (see init): when the command exits, so does PID 1,
   and the kernel kills every process left in the namespace, however they forked or detached (setsid daemons too).

A failure in any step is fatal (exit 125 with one line on stderr): running a candidate without its wall is never
the fallback.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import struct
import sys

FAIL = 125

# <sys/mount.h>, <linux/mount.h>, <linux/prctl.h>, <linux/securebits.h>
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC = 0x20, 0x1000, 0x2000, 0x4000
MS_NOATIME, MS_NODIRATIME, MS_RELATIME, MS_STRICTATIME = 0x400, 0x800, 0x200000, 0x1000000
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
MOUNT_ATTR_RDONLY = 0x1
SYS_MOUNT_SETATTR = 442  # x86_64 and aarch64 share it
PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_SET_SECUREBITS, PR_CAP_AMBIENT = 38, 24, 28, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
PR_SET_PDEATHSIG = 1
SECBIT_NOROOT, SECBIT_NOROOT_LOCKED = 1 << 0, 1 << 1
SECBIT_NO_SETUID_FIXUP, SECBIT_NO_SETUID_FIXUP_LOCKED = 1 << 2, 1 << 3
SECBIT_KEEP_CAPS_LOCKED, SECBIT_NO_CAP_AMBIENT_RAISE, SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED = 1 << 5, 1 << 6, 1 << 7
_OPTION_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
                 "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME, "strictatime": MS_STRICTATIME}

# The interpreter's own libc (find_library would spawn ldconfig: a process, and time).
_libc = ctypes.CDLL(None, use_errno=True)


class Refused(Exception):
    """A step of the wall could not be built."""


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise Refused(f"{what}: {os.strerror(err)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda s: s.encode() if s is not None else None)
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _setattr(path: str, attr: _MountAttr) -> int:
    return int(_libc.syscall(ctypes.c_long(SYS_MOUNT_SETATTR), ctypes.c_int(AT_FDCWD), path.encode(),
                             ctypes.c_uint(AT_RECURSIVE), ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr))))


def read_only_everywhere(exempt: list[str]) -> None:
    """Every mount of this namespace read-only (but those under `exempt`): one recursive mount_setattr (Linux >= 5.12)
    and one to clear each exemption, else one remount per mount."""
    if _setattr("/", _MountAttr(attr_set=MOUNT_ATTR_RDONLY)) == 0:
        for path in exempt:
            if os.path.isdir(path) and _setattr(path, _MountAttr(attr_clr=MOUNT_ATTR_RDONLY)) != 0:
                raise Refused(f"cannot leave {path} writable: {os.strerror(ctypes.get_errno())}")
        return
    for target, options in _mounts():
        if any(_inside(target, e) for e in exempt):
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for opt in options:
            flags |= _OPTION_FLAGS.get(opt, 0)
        if _libc.mount(None, target.encode(), None, ctypes.c_ulong(flags), None) != 0:
            err = ctypes.get_errno()
            if err not in (2, 13):  # ENOENT (gone), EACCES (a mount we cannot see through): stays as is
                raise Refused(f"remount {target} read-only: {os.strerror(err)}")


def _mounts() -> list[tuple[str, list[str]]]:
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            target = fields[4].encode().decode("unicode_escape")
            out.append((target, fields[5].split(",")))
    return out


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def mask(target: str, keep: list[str], writable: list[str], stage: str, size_mb: int, scratch: bool) -> None:
    """Replace `target` by an empty tmpfs holding only `keep` (bind-mounted back at their paths); the tmpfs stays
    writable only for scratch places (/tmp and the like: private, gone with the namespace).

    The tmpfs is assembled at `stage` (an existing empty directory) while the kept paths are still reachable,
    then moved over `target` in one step."""
    mount("tmpfs", stage, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={size_mb}m")
    for path in sorted(keep, key=len):
        inner = stage + path[len(target.rstrip("/")):]
        if os.path.isdir(path):
            os.makedirs(inner, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(inner), exist_ok=True)
            open(inner, "a").close()
        # Not recursive: the staging tmpfs itself may lie inside a kept path (the workdir).
        mount(path, inner, None, MS_BIND)
        if path in writable:
            _clear_read_only(inner, path)
    mount(stage, target, None, MS_MOVE)
    if not scratch:
        mount(None, target, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def make_writable(path: str) -> None:
    """A bind of `path` onto itself without the read-only flag (for a writable path outside every mask)."""
    mount(path, path, None, MS_BIND)
    _clear_read_only(path, path)


def _clear_read_only(target: str, source: str) -> None:
    """Remount a bind read-write, keeping the source mount's other flags (in a user namespace they are locked)."""
    best = max((m for m in _mounts() if _inside(source, m[0])), key=lambda m: len(m[0]), default=("/", []))
    flags = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV
    for opt in best[1]:
        flags |= _OPTION_FLAGS.get(opt, 0)
    mount(None, target, None, flags)


def loopback_up() -> None:
    """`ip link set lo up`, without ip: SIOCGIFFLAGS / SIOCSIFFLAGS on a socket."""
    SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
    import fcntl

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifr = struct.pack("16sh14x", b"lo", 0)
        flags = struct.unpack("16sh14x", fcntl.ioctl(s, SIOCGIFFLAGS, ifr))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sh14x", b"lo", flags | IFF_UP))


def set_limits(limits: dict[str, int]) -> None:
    import resource

    for name, value in limits.items():
        res = getattr(resource, f"RLIMIT_{name.upper()}")
        resource.setrlimit(res, (value, value))


def drop_privileges(uid: int | None, gid: int | None) -> None:
    """No way back to any privilege: an unprivileged uid where we are real root, no capabilities otherwise."""
    prctl = _libc.prctl
    if uid is not None:
        os.setgroups([])
        os.setresgid(gid if gid is not None else uid, gid if gid is not None else uid, gid if gid is not None else uid)
        os.setresuid(uid, uid, uid)
        if os.getuid() != uid or os.geteuid() != uid:
            raise Refused("setuid did not take")
    else:
        # a user namespace maps only our own uid (as 0): empty the bounding set, lock uid 0 out of capabilities
        for cap in range(64):
            if prctl(PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0) != 0 and ctypes.get_errno() != 22:  # EINVAL: no such cap
                raise Refused(f"cannot drop capability {cap}: {os.strerror(ctypes.get_errno())}")
        prctl(PR_CAP_AMBIENT, ctypes.c_ulong(PR_CAP_AMBIENT_CLEAR_ALL), 0, 0, 0)
        bits = (SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED
                | SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED)
        _check(prctl(PR_SET_SECUREBITS, ctypes.c_ulong(bits), 0, 0, 0), "set securebits")
    _check(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "set no_new_privs")


def die_with_parent(parent: int) -> None:
    """Re-arm the parent-death SIGKILL that unshare's --kill-child (or the agent's preexec) set: the kernel clears it
    when the credentials change, so after setresuid a SIGKILLed agent left this process, PID 1 of the namespace, and
    the candidate under it running (found by test_cli_search's kill test). `parent`: getppid() before anything (0
    inside a new PID namespace, whose parent is outside it: there the check cannot see a parent that died between the
    uid change and this call, a window of microseconds)."""
    _check(_libc.prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL), 0, 0, 0), "set the parent-death signal")
    if os.getppid() != parent:
        raise Refused("the agent ended before the sandbox was built")


def build(spec: dict) -> None:
    """Everything before exec, as the spec says (see sandbox.contain_spec for its fields)."""
    parent = os.getppid()
    if spec.get("namespaces"):
        stages = spec["stages"]
        read_only_everywhere(spec.get("exempt", []))
        for i, (target, keep, scratch) in enumerate(spec["masks"]):
            mask(target, keep, spec["writable"], stages[i], spec["tmpfs_mb"], scratch)
        for path in spec["writable"]:
            if not any(_inside(path, m[0]) for m in spec["masks"]):
                make_writable(path)
        loopback_up()
    os.chdir(spec["cwd"])
    set_limits(spec["limits"])
    if spec.get("uid") is not None or spec.get("namespaces"):
        drop_privileges(spec.get("uid"), spec.get("gid"))
    else:
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "set no_new_privs")
    die_with_parent(parent)


def init(argv: list[str]) -> int:
    """Stay as the namespace's PID 1 and run the command as its child: PID 1 ignores signals it has no handler for
    (a command that raises SIGSEGV or SIGABRT at itself would survive them), and orphans need reaping. Returns the
    command's status as a shell does: its exit code, or 128 + the signal that killed it."""
    child = os.fork()
    if child == 0:
        try:
            os.execvp(argv[0], argv)
        except OSError as e:
            print(f"agent sandbox: cannot start {argv[0]}: {e.strerror}", file=sys.stderr)
        os._exit(127)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return FAIL
        if pid == child:
            return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: contain.py SPEC_JSON -- COMMAND...", file=sys.stderr)
        return FAIL
    try:
        spec = json.loads(argv[0])
        build(spec)
    except (Refused, OSError, ValueError, KeyError) as e:
        print(f"agent sandbox: cannot contain the command: {e}", file=sys.stderr)
        return FAIL
    if not spec.get("namespaces"):
        os.execvp(argv[2], argv[2:])  # no namespace to hold together: become the command
    return init(argv[2:])  # when it returns, PID 1 exits and the kernel kills whatever is left in the namespace


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

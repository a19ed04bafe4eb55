"""Which part of the candidate's wall stops CUDA on this machine (a diagnosis, run on the GPU host)."""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from agent.harness.wall import sandbox
from agent.harness.wall.contain import __file__ as CONTAIN

PROBE = "import torch; torch.cuda.init(); print('cuda ok', torch.cuda.device_count(), torch.ones(2, device='cuda').sum().item())"
UNSHARE = ["unshare", "--pid", "--fork", "--kill-child=SIGKILL", "--mount-proc", "--mount", "--net", "--"]

def run(label, cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env or sandbox.clean_env({"PYTHONPATH": os.environ.get("PYTHONPATH", "")}))
    tail = (r.stdout + r.stderr).strip().splitlines()
    print(f"{label:40s} rc={r.returncode} {tail[-1][:160] if tail else ''}", flush=True)

def spec(work, **kw):
    iso = sandbox.probe()
    s = sandbox.contain_spec(work, iso, {"core": 0})
    s.update(kw)
    return s

def contain(label, work, patch="pass", **kw):
    s = spec(work, **kw)
    code = ("import sys, json; sys.path.insert(0, %r); import contain as c; %s; sys.exit(c.main(sys.argv[1:]))"
            % (str(Path(CONTAIN).parent), patch))
    run(label, [*UNSHARE, sys.executable, "-I", "-S", "-c", code, json.dumps(s), "--", sys.executable, "-c", PROBE])

ls = subprocess.run("ls -la /dev/nvidia* /dev/shm | head; mount | grep -E ' /dev | /dev/shm | /proc | /sys ' ; cat /proc/driver/nvidia/params | grep -i -E 'admin|uvm' ", shell=True, capture_output=True, text=True)
print(ls.stdout, ls.stderr)
run("plain", [sys.executable, "-c", PROBE])
run("unshare only", [*UNSHARE, sys.executable, "-c", PROBE])
with tempfile.TemporaryDirectory() as d:
    w = Path(d); os.chown(w, 65534, 65534)
    contain("contain full", w)
    for ex in (["/dev"], ["/proc"], ["/sys"], ["/dev", "/proc", "/sys"], ["/dev", "/sys"], ["/dev", "/proc"], ["/proc", "/sys"]):
        contain(f"contain, writable {'+'.join(ex)}", w, exempt=ex)

"""bench/diag/planted_gap.py: every planted GAP kind is valid Triton that computes the GAP (TRITON_INTERPRET=1 at a
tiny size); the GPU records their reports with bench/diag/planted_profile.py."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "bench" / "diag"))
from planted_gap import GPU_ONLY, KINDS, TINY_SHAPE, kernel_names  # noqa: E402

SCRIPT = """
import sys, torch
sys.path.insert(0, "bench/diag")
from planted_gap import forward
torch.manual_seed(0)
x = torch.rand(*{shape})
for kind in {kinds}:
    got = forward(kind, x).double()
    want = (x.double() * 0.5).mean(dim=(2, 3))
    err = ((got - want).abs().max() / want.abs().max()).item()
    print(kind, err)
    assert got.shape == want.shape and err < 1e-5, (kind, err)
"""


def test_there_are_at_least_eleven_planted_kinds_with_a_control():
    assert len(KINDS) >= 11 and "healthy" in KINDS and len(set(KINDS)) == len(KINDS)


def test_every_planted_kind_runs_under_the_interpreter_and_computes_the_gap():
    kinds = [k for k in KINDS if k not in GPU_ONLY]
    p = subprocess.run([sys.executable, "-c", SCRIPT.format(shape=TINY_SHAPE, kinds=kinds)], capture_output=True,
                       text=True, cwd=REPO, timeout=600, env={**__import__("os").environ, "TRITON_INTERPRET": "1"})
    assert p.returncode == 0, p.stderr[-2000:]
    assert [line.split()[0] for line in p.stdout.splitlines()] == kinds


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_names_the_kernels_ncu_keeps(kind):
    assert kernel_names(kind) and all(n.startswith("gap_") and n.endswith("_kernel") for n in kernel_names(kind))


def test_the_profile_driver_records_each_kinds_failure_and_goes_on(tmp_path):
    """Without a GPU every kind fails at its first step: each says so in its JSON and the table, none stops the rest."""
    import json

    p = subprocess.run([sys.executable, "bench/diag/planted_profile.py", str(tmp_path), "--kinds", "healthy,launches",
                        "--timeout", "120", "--size", "2,4,16,16"], capture_output=True, text=True, cwd=REPO,
                       timeout=300, env={k: v for k, v in __import__("os").environ.items() if k != "TRITON_INTERPRET"})
    assert p.returncode == 1, p.stderr[-2000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert list(summary) == ["healthy", "launches"] and not any(r["ok"] for r in summary.values())
    assert all(r["error"].startswith("check: ") for r in summary.values())
    assert [line.split()[:2] for line in p.stdout.splitlines()] == [["healthy", "FAIL"], ["launches", "FAIL"]]
    import tarfile

    with tarfile.open(tmp_path / "planted.tgz") as tar:  # one file for a device that returns a few per call
        assert sorted(tar.getnames()) == ["healthy.json", "launches.json", "summary.json"]
    bad = subprocess.run([sys.executable, "bench/diag/planted_profile.py", str(tmp_path), "--kinds", "nope"],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert bad.returncode == 2 and "unknown kinds nope" in bad.stderr

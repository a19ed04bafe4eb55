"""The wheel carries everything a non-editable install needs: templates, data files, problems, migrations."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SEED = REPO.parent / "shared" / "seed" / "003_a184372c8946f8bb.txt"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """`pip wheel .` then the wheel unpacked into a bare directory: no repository on the path."""
    out = tmp_path_factory.mktemp("wheel")
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        pytest.skip(f"cannot build a wheel here (no build backend from the index?): {p.stderr.strip()[-200:]}")
    [wheel] = out.glob("agent-*.whl")
    site = out / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    return site


@pytest.mark.slow
def test_the_wheel_ships_templates_data_problems_and_migrations(installed):
    pkg = installed / "agent"
    for rel in ("prompts/memory-fusion.j2", "prompts/partials/target_gpu.j2", "data/gpus.toml", "data/stages.toml",
                "data/metrics.toml", "data/prices.toml", "data/migrations/001_initial.sql", "data/kernels/ops.toml",
                "problems/gap44.py", "problems/gap44_start.py", "data/problems.toml"):
        assert (pkg / rel).is_file(), rel


@pytest.mark.slow
def test_a_non_editable_install_renders_the_seed_prompt_byte_for_byte(installed, tmp_path):
    if not SEED.exists():
        pytest.skip("../shared is not beside the checkout")
    env = {**os.environ, "PYTHONPATH": str(installed)}
    p = subprocess.run([sys.executable, "-m", "agent", "render", "--stage", "memory-fusion", "--gpu", "4090",
                        "--problem", "gap44", "--metrics", str(REPO / "tests" / "data" / "seed_metrics.json")],
                       capture_output=True, cwd=tmp_path, env=env, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    assert p.stdout == SEED.read_bytes()
    # and it really ran from the unpacked wheel, not from the checkout
    q = subprocess.run([sys.executable, "-c", "import agent; print(agent.__file__)"], capture_output=True, text=True,
                       cwd=tmp_path, env=env, timeout=60)
    assert q.stdout.strip().startswith(str(installed))

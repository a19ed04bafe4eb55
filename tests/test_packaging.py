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
                "prompts/partials/memory.j2", "data/migrations/004_search.sql", "data/migrations/005_energy.sql",
                "problems/gap44.py", "problems/gap44_start.py", "data/problems.toml", "problems/source.py",
                "data/kernelbench/README.md", "data/kernelbench/kb_42_convt2d_gap_bias_lse_sum_mul.py",
                "data/report/run.html.j2"):
        assert (pkg / rel).is_file(), rel


@pytest.mark.slow
def test_a_non_editable_install_renders_the_seed_prompt_byte_for_byte(installed, tmp_path):
    if not SEED.exists():
        pytest.skip("../shared is not beside the checkout")
    env = {**os.environ, "PYTHONPATH": str(installed)}
    p = subprocess.run([sys.executable, "-m", "agent", "render", "--stage", "memory-fusion", "--gpu", "4090",
                        "--problem", "gap44", "--metrics", str(REPO / "tests" / "data" / "seed_metrics.json"),
                        "--diagnosis", "off"],
                       capture_output=True, cwd=tmp_path, env=env, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    assert p.stdout == SEED.read_bytes()
    # and it really ran from the unpacked wheel, not from the checkout
    q = subprocess.run([sys.executable, "-c", "import agent; print(agent.__file__)"], capture_output=True, text=True,
                       cwd=tmp_path, env=env, timeout=60)
    assert q.stdout.strip().startswith(str(installed))


def _cpu_quick_start() -> list[str]:
    readme = (REPO / "README.md").read_text()
    start = readme.index("On a CPU-only machine")
    block = readme[readme.index("```bash\n", start) + len("```bash\n"):]
    block = block[:block.index("```")]
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


@pytest.mark.slow  # asks pip to resolve the project's dependencies (no download: a dry run)
def test_the_cpu_quick_start_is_two_commands_and_installs_no_cuda_library():
    """README's CPU quick start: PyTorch's CPU build first, then the project, which then pulls nothing of CUDA."""
    import torch

    install, run = _cpu_quick_start()
    assert install.startswith("pip install torch --index-url https://download.pytorch.org/whl/cpu && ")
    assert install.endswith("pip install -e .") and run == "agent run --stage memory-fusion"
    if "+cpu" not in torch.__version__:
        pytest.skip(f"torch here is {torch.__version__}, not the CPU build the quick start installs first")
    report = Path(os.environ.get("TMPDIR", "/tmp")) / f"agent-dry-run-{os.getpid()}.json"
    p = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report", str(report), "-e",
                        str(REPO)], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        pytest.skip(f"pip cannot resolve here (no index?): {p.stderr.strip()[-200:]}")
    import json

    names = [item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]]
    report.unlink()
    # nvidia-ml-py is NVML's Python bindings (pure Python, energy per call): no CUDA library comes with it
    assert "torch" not in names and not [n for n in names if n.startswith("nvidia") and n != "nvidia-ml-py"], names

"""`agent gpus | stages | problems | render` through real subprocesses: output, exact bytes, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, SEED_PROMPT

DATA = Path(__file__).parent / "data"


def agent(*args: str, timeout: float = 60, columns: int = 200) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": str(columns)}  # tables as wide as they need (a pytest plugin here sets 80)
    return subprocess.run([sys.executable, "-m", "agent", *args], cwd=REPO, capture_output=True, timeout=timeout, env=env)


def assert_one_line_error(result: subprocess.CompletedProcess, *needles: str) -> None:
    err = result.stderr.decode()
    assert result.returncode == 2, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    for n in needles:
        assert n in err, err


def test_help_lists_the_catalog_commands():
    out = agent("--help").stdout.decode()
    for cmd in ("gpus", "stages", "problems", "render"):
        assert f"    {cmd} " in out


def test_agent_alone_prints_its_help_and_exits_0():
    result = agent()
    assert result.returncode == 0 and result.stderr == b""
    assert "COMMAND" in result.stdout.decode() and "    run " in result.stdout.decode()


def test_help_does_not_import_torch_triton_or_jinja2():
    code = ("import sys\nfrom agent.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('torch', 'triton', 'jinja2') if m in sys.modules), file=sys.stderr)\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, timeout=60)
    assert result.stderr.decode().strip().splitlines()[-1] == "[]"


def test_without_a_cuda_driver_gpus_and_render_detect_no_gpu_without_importing_torch():
    """Before: `agent gpus` and a render for --gpu auto imported torch (seconds) only to hear that there is no GPU."""
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
        pytest.skip("a CUDA driver is installed here: torch is asked which GPU runs")
    except OSError:
        pass
    code = ("import sys\nfrom agent.cli import main\nmain(['gpus'])\nmain(['render'])\n"
            "print(sorted(m for m in ('torch', 'triton') if m in sys.modules), file=sys.stderr)\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr.decode()
    assert "no CUDA device detected" in result.stdout.decode() and "GPU Name: 4090" in result.stdout.decode()
    assert result.stderr.decode().strip().splitlines()[-1] == "[]"


def test_gpus_lists_the_catalog_and_marks_the_target():
    out = agent("gpus").stdout.decode()
    for name in ("4090", "RTX 3090", "L4", "L40S", "A100 80GB", "H100 SXM", "H200"):
        assert name in out
    assert "*" in out


@pytest.mark.parametrize("columns", [50, 60, 80, 120])
def test_catalog_tables_respect_columns_and_never_cut_a_value_or_a_stage_name(columns):
    """Before: at 60 columns every GPU value read '4…' and stage names folded mid-word."""
    gpus = agent("gpus", columns=columns).stdout.decode()
    assert max(len(line) for line in gpus.splitlines()) <= columns
    assert "…" not in gpus and "4090" in gpus and "1008" in gpus
    stages = agent("stages", columns=columns).stdout.decode()
    assert max(len(line) for line in stages.splitlines()) <= columns
    for name in ("correctness", "memory-fusion", "memory-access", "host-overhead"):
        assert name in stages, (name, stages)


def test_stages_lists_stage_focus_and_metrics():
    out = agent("stages").stdout.decode()
    for name in ("correctness", "memory-fusion", "parallelism", "memory-access", "tuning", "algebraic", "host-overhead"):
        assert name in out
    assert "Memory pattern for fused operations." in out and "lts__t_sector_hit_rate.pct" in out


def test_problems_lists_every_problem_that_problem_accepts_by_name():
    """Before: the four built-in ones; the eight kb_* look-alikes appeared only in the error for an unknown name."""
    from agent.problems import list_problems, lookalikes

    out = agent("problems").stdout.decode()
    names = [p.name for p in list_problems()] + [p.stem for p in lookalikes()]
    assert len(names) == 12 and "gap44" in names and "kb_44_convt2d_mul_gap_gap" in names
    for name in names:
        assert name in out, name
    unknown = agent("render", "--problem", "no-such").stderr.decode()
    assert all(name in unknown for name in names)  # the error's list and this one are the same names


def test_render_prints_the_seed_byte_for_byte(tmp_path):
    if not SEED_PROMPT.exists():
        pytest.skip(f"the seed prompt is not beside the checkout ({SEED_PROMPT})")
    code = tmp_path / "code.py"
    code.write_bytes((REPO / "agent" / "problems" / "gap44_start.py").read_bytes())
    result = agent("render", "--stage", "memory-fusion", "--gpu", "4090", "--problem", "gap44",
                   "--code", str(code), "--metrics", str(DATA / "seed_metrics.json"), "--diagnosis", "off")
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout == SEED_PROMPT.read_bytes()


def test_render_adds_a_diagnosis_block_from_the_metrics_unless_it_is_off(tmp_path):
    """The seed's metrics (an RTX 4090's: 128 SMs) read on the target; the report's on the H100 it was recorded on."""
    args = ("render", "--stage", "memory-fusion", "--gpu", "4090", "--problem", "gap44", "--metrics",
            str(DATA / "seed_metrics.json"))
    out = agent(*args).stdout.decode()
    block = out.split("[DIAGNOSIS]\n", 1)[1].split("\n\n**Task**", 1)[0].splitlines()
    assert block[1].startswith("- grid 32 programs on 128 SMs: 96 SMs (75 %) idle [")
    assert "[DIAGNOSIS]" not in agent(*args, "--diagnosis", "off").stdout.decode()
    report = REPO.parent / "shared" / "fixtures" / "ncu" / "seed_h100_full.ncu-rep"
    if report.exists():  # read as the loop's profiler reads it: the diagnosis's counters too (limits, stalls)
        out = agent("render", "--gpu", "4090", "--metrics", str(report)).stdout.decode()
        block = out.split("[DIAGNOSIS]\n", 1)[1].split("\n\n**Task**", 1)[0]
        block, allows = block.split("This stage's rules allow:\n", 1)  # memory-fusion's stage data, after the findings
        block = block.splitlines()[1:]
        # at most five findings, root causes first, each followed by the symptoms it explains
        findings = [line for line in block if line.startswith("- ")]
        assert len(findings) == 5 and block[0].startswith("- grid 32 programs on 132 SMs: 100 SMs (76 %) idle")
        assert "channels-last" in allows and "without its bias" in allows and "split reduction" in allows
        assert block[1].startswith("  It explains: ") and "long_scoreboard" in block[1]  # the grid's idle SMs
        assert block[2].startswith("- 255 registers per thread, 1,918,848 spill instructions")
        assert block[3].startswith("  It explains: ") and "registers limit it (255 per thread" in block[3]


def test_render_defaults_to_the_starting_kernel_and_takes_feedback(tmp_path):
    fb = tmp_path / "fb.json"
    fb.write_text(json.dumps([{"candidate": "it1-c3", "verdict": "incorrect", "message": "off by 2"}]))
    result = agent("render", "--stage", "parallelism", "--gpu", "h100", "--problem", "gap_large", "--feedback", str(fb))
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()
    assert "GPU Name: H100 SXM\n" in out and "def gap_kernel(" in out and "- it1-c3: incorrect\n  off by 2\n" in out


def test_render_reads_metrics_from_an_ncu_report(shared):
    report = shared / "fixtures" / "ncu" / "seed_h100_metrics.ncu-rep"
    if not report.exists():
        pytest.skip("no ncu report fixture")
    result = agent("render", "--gpu", "h100", "--metrics", str(report))
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()
    block = out.split("[NCU PROFILING METRICS]\n", 1)[1].split("\n\n[DIAGNOSIS]", 1)[0]
    metrics = json.loads(block)["fused_multiply_gap_kernel_optimized"]
    assert list(metrics)[:2] == ["sm__throughput.avg.pct_of_peak_sustained_elapsed", "launch__grid_size"]
    assert metrics["launch__grid_size"] == 32


def test_render_a_problem_file_by_path(tmp_path):
    result = agent("render", "--stage", "correctness", "--gpu", "l4", "--problem",
                   str(REPO / "agent" / "problems" / "conv3d_gap.py"), "--code", str(REPO / "agent" / "problems" / "gap_large_start.py"))
    assert result.returncode == 0, result.stderr.decode()
    assert "nn.Conv3d" in result.stdout.decode()


@pytest.mark.parametrize("args,needles", [
    (["--stage", "fusion"], ["unknown stage 'fusion'", "memory-fusion"]),
    (["--gpu", "v100"], ["unknown GPU 'v100'", "h100"]),
    (["--problem", "gap45"], ["unknown problem 'gap45'", "gap44"]),
    (["--problem", "gap[bold]44"], ["unknown problem 'gap[bold]44'"]),  # the user's text, never rich markup
    (["--code", "/nonexistent/code.py"], ["code file not found"]),
    (["--code", "/tmp"], ["code file /tmp is a directory, not a file"]),
    (["--metrics", "/nonexistent/m.json"], ["metrics file not found"]),
    (["--problem", "conv3d_gap"], ["no starting kernel", "--code"]),
    (["--bogus"], ["unrecognized arguments"]),
])
def test_bad_render_input_is_one_line_exit_2(args, needles):
    assert_one_line_error(agent("render", *args), *needles)


def test_render_without_gpu_on_a_cpu_machine_prints_the_prompt_and_no_warning():
    """Before: 'WARNING agent.catalog: no CUDA device detected ...' on every CPU render; the prompt names its GPU."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA machine detects its GPU")
    r = agent("render")
    assert r.returncode == 0 and r.stderr.decode() == "" and "GPU Name: 4090" in r.stdout.decode()


def test_malformed_metrics_json_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "m.json"
    bad.write_text('{"kernel": {"metric": "fast"}}')
    assert_one_line_error(agent("render", "--metrics", str(bad)), "kernel -> metric -> number")


def test_malformed_feedback_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "fb.json"
    bad.write_text('[{"candidate": "c", "verdict": "great", "message": ""}]')
    assert_one_line_error(agent("render", "--feedback", str(bad)), "feedback file")

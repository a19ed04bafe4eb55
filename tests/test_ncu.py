"""agent.ncu: reading saved Nsight Compute reports (the seed's kernel on an H100), diffing and classifying them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agent import ncu
from agent.errors import UserError
from agent.prompts import stage_table
from agent.schema import GPUSpec, KernelProfile, Profile, Stage

DATA = Path(__file__).parent / "data" / "ncu"
STAGE_REPORT = DATA / "seed_h100_metrics.ncu-rep"
FULL_REPORT = DATA / "seed_h100_full.ncu-rep"
KERNEL = "fused_multiply_gap_kernel_optimized"
SEED_METRICS = [  # the seed prompt's five, in its order
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "launch__grid_size",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__t_sector_hit_rate.pct",
]
STAGE = Stage(name="memory-fusion", focus="fusion", template="memory_fusion.j2", metrics=SEED_METRICS)
H100 = GPUSpec(key="h100", name="H100", architecture="Hopper", compute_capability="9.0", sms=132,
               memory_bandwidth_gbs=3350, fp32_tflops=67, tf32_tflops=494.7, bf16_tflops=989.4, fp16_tflops=989.4,
               max_threads_per_sm=2048, max_warps_per_sm=64, smem_per_sm_kb=228, smem_per_block_kb=227, l2_mb=50)


@pytest.fixture(scope="module")
def stage_profile() -> Profile:
    return ncu.read_report(STAGE_REPORT, ncu.stage_metric_set(STAGE))


@pytest.fixture(scope="module")
def full_profile() -> Profile:
    return ncu.read_report(FULL_REPORT, ncu.stage_metric_set(STAGE))


def kernel(metrics: dict, launches: int = 1, name: str = "k") -> KernelProfile:
    return KernelProfile(name=name, launches=launches, metrics=metrics)


# ---------------------------------------------------------------- reading


def test_stage_metric_set_is_the_stage_metrics_then_duration_and_launch_size():
    names = ncu.stage_metric_set(STAGE)
    assert names[:5] == SEED_METRICS
    assert names[5:7] == ["gpu__time_duration.sum", "launch__block_size"]
    assert len(names) == len(set(names))


def test_reads_the_seed_kernel_from_a_stage_report(stage_profile):
    k = stage_profile.kernels[KERNEL]
    assert list(stage_profile.kernels) == [KERNEL]
    assert stage_profile.gpu == "NVIDIA H100 80GB HBM3"
    assert stage_profile.metric_set == "stage"
    assert k.launches == 1
    assert k.grid == [16, 2, 1] and k.block == [128, 1, 1]
    assert k.metrics["launch__grid_size"] == 32 and isinstance(k.metrics["launch__grid_size"], int)
    assert k.metrics["launch__block_size"] == 128
    assert round(k.metrics["dram__throughput.avg.pct_of_peak_sustained_elapsed"], 2) == 23.51
    assert k.metrics["gpu__time_duration.sum"] == 685824
    assert round(k.metrics["sm__throughput.avg.pct_of_peak_sustained_elapsed"], 2) == 2.52
    assert round(k.metrics["sm__warps_active.avg.pct_of_peak_sustained_active"], 2) == 6.25
    assert round(k.metrics["lts__t_sector_hit_rate.pct"], 2) == 11.10
    assert k.rules == []


def test_keeps_only_the_metrics_asked_for(stage_profile):
    assert set(stage_profile.kernels[KERNEL].metrics) == set(ncu.stage_metric_set(STAGE))


def test_prompt_table_has_the_stage_metrics_in_stage_order(stage_profile):
    table = stage_table(stage_profile.table(), STAGE)
    assert list(table) == [KERNEL]
    assert list(table[KERNEL]) == SEED_METRICS


def test_full_report_answers_the_stage_dram_metric_through_its_alias(full_profile):
    # --set full has no dram__throughput; ncu's SpeedOfLight reports it as gpu__dram_throughput
    m = full_profile.kernels[KERNEL].metrics
    assert full_profile.metric_set == "full"
    assert round(m["dram__throughput.avg.pct_of_peak_sustained_elapsed"], 2) == 23.71
    assert "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed" not in m
    assert set(m) == set(ncu.stage_metric_set(STAGE))


def test_full_report_carries_guided_analysis_rules_with_messages(full_profile):
    rules = full_profile.kernels[KERNEL].rules
    assert len(rules) >= 10
    by_id = {r.rule: r for r in rules}
    assert by_id["LaunchConfiguration"].title == "Small Grid"
    assert "32 blocks" in by_id["LaunchConfiguration"].message
    assert by_id["LaunchConfiguration"].kind == "optimization"
    assert by_id["LaunchConfiguration"].estimated_speedup_pct == pytest.approx(75.76, abs=0.01)
    assert all(r.message for r in rules)
    # ncu's in-message links are reduced to their labels
    assert not any("@section:" in r.message or "@url:" in r.message for r in rules)
    assert "Look at Launch Statistics for more details" in by_id["SOLBottleneck"].message
    assert "converting pairs of non-fused instructions to their fused, higher-throughput" in by_id["FPInstructions"].message


def test_default_metrics_are_the_described_ones_the_report_has():
    prof = ncu.read_report(FULL_REPORT)
    m = prof.kernels[KERNEL].metrics
    assert set(m) <= set(ncu.meta().metrics)
    assert "dram__bytes_read.sum" in m and "launch__registers_per_thread" in m


@pytest.mark.parametrize("content, words", [
    (b"", "not an Nsight Compute report"),
    (b"hello, world\n", "not an Nsight Compute report"),
])
def test_a_file_that_is_not_a_report_is_a_one_line_user_error(tmp_path, content, words):
    bad = tmp_path / "bad.ncu-rep"
    bad.write_bytes(content)
    with pytest.raises(UserError, match=words) as e:
        ncu.read_report(bad)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("fixture", [STAGE_REPORT, FULL_REPORT])
def test_a_truncated_report_is_a_one_line_user_error(tmp_path, fixture):
    cut = tmp_path / "cut.ncu-rep"
    data = fixture.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match="truncated") as e:
        ncu.read_report(cut)
    assert "\n" not in str(e.value)


def test_a_missing_report_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="no such report"):
        ncu.read_report(tmp_path / "nope.ncu-rep")


# ---------------------------------------------------------------- the CSV fallback (ncu -i --csv --page raw)

# The shape `ncu -i REPORT --csv --page raw --print-units base --print-kernel-base function` prints: ncu's own
# lines, a header (launch columns, then metric names), a units row, one row per launch. Two launches of one
# kernel (different grids and durations) and one of another.
RAW_CSV = '''==PROF== Disconnected from process 4242
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","device__attribute_display_name","dram__throughput.avg.pct_of_peak_sustained_elapsed","gpu__time_duration.sum","launch__block_size","launch__grid_size","launch__sm_count","lts__t_sector_hit_rate.pct","sm__throughput.avg.pct_of_peak_sustained_elapsed","sm__warps_active.avg.pct_of_peak_sustained_active"
"","","","","","","","","","","","","%","nsecond","","","SM","%","%","%"
"0","4242","python3.11","127.0.0.1","gap_rows","1","7","(128, 1, 1)","(2048, 1, 1)","0","9.0","NVIDIA H100 80GB HBM3","80.00","100,000","128","2048","132","10.00","20.00","50.00"
"1","4242","python3.11","127.0.0.1","gap_rows","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","NVIDIA H100 80GB HBM3","90.00","300,000","128","4096","132","20.00","30.00","70.00"
"2","4242","python3.11","127.0.0.1","finish","1","7","(32, 1, 1)","(1, 1, 1)","0","9.0","NVIDIA H100 80GB HBM3","1.50","2,500","32","1","132","5.00","0.50","1.00"
'''


def test_raw_csv_is_parsed_into_launches():
    launches, full, gpu, sms = ncu.parse_raw_csv(RAW_CSV)
    assert [x.name for x in launches] == ["gap_rows", "gap_rows", "finish"]
    assert gpu == "NVIDIA H100 80GB HBM3" and sms == 132 and full is False
    first = launches[0].values
    assert first["gpu__time_duration.sum"] == 100_000  # thousands separator removed
    assert first["launch__grid_dim_x"] == 2048 and first["launch__block_dim_x"] == 128  # from "(2048, 1, 1)"
    assert first["dram__throughput.avg.pct_of_peak_sustained_elapsed"] == 80.0


def test_raw_csv_converts_time_units_to_nanoseconds():
    text = RAW_CSV.replace('"nsecond"', '"usecond"')
    launches, *_ = ncu.parse_raw_csv(text)
    assert launches[0].values["gpu__time_duration.sum"] == 100_000_000


def test_launches_of_one_kernel_are_aggregated_explicitly():
    launches, *_ = ncu.parse_raw_csv(RAW_CSV)
    prof = ncu.aggregate(launches, ncu.stage_metric_set(STAGE))
    k = prof.kernels["gap_rows"]
    assert list(prof.kernels) == ["gap_rows", "finish"]
    assert k.launches == 2
    assert k.metrics["gpu__time_duration.sum"] == 400_000  # summed
    assert k.metrics["dram__throughput.avg.pct_of_peak_sustained_elapsed"] == pytest.approx(87.5)  # (80·1 + 90·3)/4
    assert k.metrics["launch__grid_size"] == 4096  # from the longest launch
    assert k.grid == [4096, 1, 1]


def test_the_csv_fallback_reads_a_report_through_ncu(tmp_path, monkeypatch):
    # a fake `ncu` first on PATH that prints the recorded CSV for `ncu -i REPORT --csv --page raw`
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "out.csv").write_text(RAW_CSV)
    fake = bin_dir / "ncu"
    fake.write_text(f'#!/bin/sh\ncase "$*" in *"--csv --page raw"*) cat "{bin_dir}/out.csv";; *) exit 3;; esac\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    prof = ncu.read_report(STAGE_REPORT, ncu.stage_metric_set(STAGE), backend="csv")
    assert list(prof.kernels) == ["gap_rows", "finish"]
    assert prof.kernels["gap_rows"].metrics["gpu__time_duration.sum"] == 400_000
    assert prof.bottleneck is not None and prof.bottleneck.kind == "memory-bound"


# ---------------------------------------------------------------- diff


def test_stage_and_full_reports_of_one_kernel_differ_only_by_noise(stage_profile, full_profile):
    deltas = ncu.diff(stage_profile, full_profile)
    by_metric = {d.metric: d for d in deltas}
    assert set(by_metric) == set(ncu.stage_metric_set(STAGE))
    assert {d.kernel for d in deltas} == {KERNEL}
    dur = by_metric["gpu__time_duration.sum"]
    assert (dur.before, dur.after, dur.delta) == (685824, 680032, -5792)
    assert dur.pct == pytest.approx(-0.845, abs=0.001)
    assert all(d.direction == "same" for d in deltas)  # all within 1 %: ncu's run-to-run noise


def test_diff_says_which_way_each_change_goes():
    a = Profile(kernels={"k": kernel({"gpu__time_duration.sum": 680_000, "launch__grid_size": 32,
                                      "dram__throughput.avg.pct_of_peak_sustained_elapsed": 23.5,
                                      "lts__t_sector_hit_rate.pct": 30.0})})
    b = Profile(kernels={"k": kernel({"gpu__time_duration.sum": 190_000, "launch__grid_size": 2048,
                                      "dram__throughput.avg.pct_of_peak_sustained_elapsed": 88.0,
                                      "lts__t_sector_hit_rate.pct": 10.0})})
    d = {x.metric: x.direction for x in ncu.diff(a, b)}
    assert d == {"gpu__time_duration.sum": "better", "launch__grid_size": "neutral",
                 "dram__throughput.avg.pct_of_peak_sustained_elapsed": "better", "lts__t_sector_hit_rate.pct": "worse"}


def test_a_renamed_single_kernel_still_diffs_positionally():
    a = Profile(kernels={"old": kernel({"gpu__time_duration.sum": 100_000}, name="old")})
    b = Profile(kernels={"new": kernel({"gpu__time_duration.sum": 50_000}, name="new")})
    (d,) = ncu.diff(a, b)
    assert d.kernel == "old → new" and d.direction == "better" and d.pct == -50


def test_a_metric_on_one_side_only_has_none_for_the_other():
    a = Profile(kernels={"k": kernel({"gpu__time_duration.sum": 1_000_000})})
    b = Profile(kernels={"k": kernel({"gpu__time_duration.sum": 1_000_000, "launch__grid_size": 8})})
    grid = next(d for d in ncu.diff(a, b) if d.metric == "launch__grid_size")
    assert (grid.before, grid.after, grid.delta, grid.direction) == (None, 8, None, "neutral")


# ---------------------------------------------------------------- classify


def test_the_seed_kernel_on_an_h100_is_latency_bound_with_its_numbers(stage_profile):
    b = stage_profile.bottleneck
    assert b is not None and b.kind == "latency-bound"
    assert b.reason.startswith("latency-bound: grid 32 blocks on 132 SMs, DRAM 23.5 %, SM 2.5 %, warps active 6.2 %")
    assert b.figures["grid"] == 32 and b.figures["sms"] == 132 and b.figures["duration_us"] == pytest.approx(685.8, abs=0.1)
    # the same verdict from the kernel alone, given the GPU
    assert ncu.classify(stage_profile.kernels[KERNEL], H100).kind == "latency-bound"


def test_a_kernel_near_peak_dram_is_memory_bound():
    b = ncu.classify(kernel({"gpu__time_duration.sum": 180_000, "launch__grid_size": 4096,
                             "dram__throughput.avg.pct_of_peak_sustained_elapsed": 88.7,
                             "sm__throughput.avg.pct_of_peak_sustained_elapsed": 12.0,
                             "sm__warps_active.avg.pct_of_peak_sustained_active": 80.0}), H100)
    assert b.kind == "memory-bound"
    assert "DRAM 88.7 %" in b.reason and "grid 4096 blocks on 132 SMs" in b.reason


def test_a_kernel_near_peak_sm_throughput_is_compute_bound():
    b = ncu.classify(kernel({"gpu__time_duration.sum": 2_000_000,
                             "dram__throughput.avg.pct_of_peak_sustained_elapsed": 20.0,
                             "sm__throughput.avg.pct_of_peak_sustained_elapsed": 91.0}))
    assert b.kind == "compute-bound" and "SM 91.0 %" in b.reason


def test_a_very_short_kernel_is_launch_bound():
    b = ncu.classify(kernel({"gpu__time_duration.sum": 6_000, "launch__grid_size": 1,
                             "dram__throughput.avg.pct_of_peak_sustained_elapsed": 0.4,
                             "sm__throughput.avg.pct_of_peak_sustained_elapsed": 0.2}, launches=2))
    assert b.kind == "launch-bound"
    assert b.reason.startswith("launch-bound: 3.0 µs per launch")


def test_a_profile_is_judged_by_its_longest_kernel():
    prof = Profile(kernels={
        "tiny": kernel({"gpu__time_duration.sum": 2_000}, name="tiny"),
        "big": kernel({"gpu__time_duration.sum": 500_000,
                       "dram__throughput.avg.pct_of_peak_sustained_elapsed": 75.0}, name="big"),
    })
    b = ncu.classify(prof)
    assert b.kind == "memory-bound" and b.reason.startswith("big: memory-bound")


def test_without_throughputs_the_bottleneck_is_unknown():
    assert ncu.classify(kernel({"gpu__time_duration.sum": 500_000})).kind == "unknown"
    assert ncu.classify(Profile()).kind == "unknown"


def test_a_report_copied_elsewhere_reads_the_same(tmp_path, stage_profile):
    copy = tmp_path / "copy.ncu-rep"
    shutil.copyfile(STAGE_REPORT, copy)
    assert ncu.read_report(copy, ncu.stage_metric_set(STAGE)).table() == stage_profile.table()

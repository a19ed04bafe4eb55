"""agent.diagnosis.graph and the analyzers it ranks: the root cause heads the list with the symptoms it explains folded
under it, one gain per cause, the roofline a position that claims none; occupancy names the limit that binds with
every other limit's number; a launch-heavy forward, an intermediate two kernels pass through DRAM and instruction
issue are causes of their own; a prompt shows at most five findings.

The profiles are planted as ncu reports them (the rows of issue 37's table, measured on an H200 at commit 29de422),
the seed's from its recorded H100 report."""

from __future__ import annotations

import pytest
from conftest import NCU_FIXTURES

from agent.catalog import find_gpu
from agent.diagnosis import DIAGNOSIS_METRICS, DiagnosisInput, diagnose, for_prompt
from agent.diagnosis.graph import EXPLAINS, kinds, node
from agent.ncu import read_report, stage_metric_set
from agent.ncu.metadata import DRAM, DURATION, GRID, SM, WARPS
from agent.schema import KernelProfile, Profile, Timing
from agent.stages import get_stage

H200 = find_gpu("h200")
CLOCK = 1.755e9  # an H200's base SM clock under ncu


def kernel(name: str = "k", *, grid: int = 2048, dram: float = 40.0, sm: float = 20.0, warps: float = 60.0,
           seconds: float = 500e-6, dram_bytes: float | None = None, launches: int = 1, **extra: float) -> KernelProfile:
    """A kernel as the profiler reads it, with the roofline's counters: memory-bound, DRAM at `dram` % of peak."""
    peak_bytes = 1280.0 * 3.75e9  # 4.8 TB/s
    moved = dram_bytes if dram_bytes is not None else dram / 100 * peak_bytes * seconds
    metrics = {DURATION: seconds * 1e9, GRID: grid, DRAM: dram, SM: sm, WARPS: warps,
               "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed": 100.0,
               "smsp__cycles_elapsed.avg.per_second": CLOCK, "dram__bytes_read.sum": moved,
               "dram__bytes_write.sum": 0.0, "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained": 16896.0,
               "dram__bytes.sum.peak_sustained": 1280.0, "dram__cycles_elapsed.avg.per_second": 3.75e9} | extra
    return KernelProfile(name=name, launches=launches, block=[128, 1, 1], metrics=metrics)


def profile(*ks: KernelProfile) -> Profile:
    return Profile(gpu="NVIDIA H200", kernels={k.name: k for k in ks})


def found(p: Profile, timing: Timing | None = None):
    return diagnose(DiagnosisInput(profile=p, gpu=H200, timing=timing))


STALLS = {"smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": 20.0,
          "smsp__average_warps_issue_stalled_selected_per_issue_active.ratio": 1.0}
LIMITS = ("registers", "shared_mem", "warps", "blocks", "barriers")


def limits(registers: float, shared: float, warps: float, blocks: float = 32, barriers: float = 32) -> dict:
    return {f"launch__occupancy_limit_{n}": v for n, v in zip(LIMITS, (registers, shared, warps, blocks, barriers))}


# ---------------------------------------------------------------- causes before symptoms


def test_a_spill_heads_the_l2_traffic_stalls_and_occupancy_it_causes_with_the_gain_of_its_local_traffic():
    """Issue 37's spill row: l2-bound 11 %, low-occupancy, stalls, spills (no gain), memory-bound 27 % in that order."""
    k = kernel(dram=35.0, sm=30.0, warps=12.0, **STALLS, **limits(2, 8, 16), **{
        "lts__throughput.avg.pct_of_peak_sustained_elapsed": 90.0, "launch__registers_per_thread": 255,
        "sm__maximum_warps_per_active_cycle_pct": 12.5, "launch__block_size": 128,
        "sass__inst_executed_register_spilling": 9.7e6, "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum": 30e6,
        "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum": 10e6, "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 60e6,
        "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": 0.0})
    out = found(profile(k))
    first = out[0]
    assert first.kind == "spills" and first.gain_pct == 61.1  # the l2-bound 61.1 % it explains; its own 40 %
    assert first.figures["local_share_pct"] == 40.0  # 40 M local sectors against 60 M global ones
    assert [node(s) for s in first.folded] == ["l2-bound", "low-occupancy:registers", "stalls"]
    assert all(s.gain_pct is None for s in first.folded)  # counted once, under the cause
    assert [f.kind for f in out] == ["spills", "memory-bound"]
    assert out[1].gain_pct is None and out[1].figures["headroom_pct"] > 0  # where it sits, not a competing gain


def test_sixteen_programs_head_the_dram_they_leave_unused_and_the_roofline_claims_no_gain():
    """Issue 37's row: low-dram 95 %, then small-grid 88 %, low-occupancy, stalls, memory-bound 96 %."""
    k = kernel(grid=16, dram=4.0, sm=2.0, warps=3.0, **STALLS)
    out = found(profile(k))
    assert [f.kind for f in out] == ["small-grid", "memory-bound"]
    assert out[0].evidence == "grid 16 programs on 132 SMs: 116 SMs (88 %) idle"
    assert {s.kind for s in out[0].folded} == {"low-dram", "low-occupancy", "stalls"}
    assert out[0].gain_pct == 95.0  # the DRAM left unused (4 % of peak against 80 %) is what the idle SMs cost
    assert out[1].gain_pct is None


def test_a_symptom_two_causes_explain_is_folded_once_under_the_larger():
    k = kernel(grid=16, dram=10.0, sm=5.0, **STALLS, **{
        "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio": 4.0,
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 1e6, "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": 1.0})
    out = [f for f in found(profile(k)) if f.kind != "memory-bound"]
    assert [f.kind for f in out] == ["small-grid", "uncoalesced-load"]  # both causes stay, by gain
    folded = [s.kind for f in out for s in f.folded]
    assert sorted(folded) == ["low-dram", "stalls"]  # each symptom once, under the first cause that explains it
    assert out[0].gain_pct == 87.9  # the larger of its own (116 of 132 SMs idle) and the DRAM left unused (87.5 %)
    assert out[1].folded == [] and out[1].gain_pct == 87.5  # its own: 7 of every 8 bytes fetched unused


def test_a_symptom_without_a_cause_stands_alone_and_a_healthy_kernel_raises_no_alarm():
    assert [f.kind for f in found(profile(kernel(dram=40.0)))] == ["low-dram", "memory-bound"]
    healthy = found(profile(kernel(dram=92.0, sm=10.0)))
    assert [f.kind for f in healthy] == ["at-dram-peak", "memory-bound"] and all(f.gain_pct is None for f in healthy)


def test_the_graph_is_data_every_cause_and_symptom_a_known_kind():
    known = {"launch-bound", "unfused", "small-grid", "tail", "spills", "uncoalesced-load", "uncoalesced-store",
             "bank-conflicts", "issue-bound", "imbalance", "low-dram", "l2-bound", "stalls", "host-bound",
             "low-occupancy"}
    for cause, symptoms in EXPLAINS.items():
        assert cause.split(":")[0] in known and all(s.split(":")[0] in known for s in symptoms), cause
        assert cause not in symptoms
    # the causes issue 37 names, each with what it explains
    assert "l2-bound" in EXPLAINS["spills"] and "low-dram" in EXPLAINS["small-grid"] and "low-dram" in EXPLAINS["tail"]
    assert "stalls" in EXPLAINS["low-occupancy:programs per SM"] and "l2-bound" in EXPLAINS["uncoalesced-load"]
    assert "host-bound" in EXPLAINS["launch-bound"] and "stalls" in EXPLAINS["bank-conflicts"]


def test_the_seeds_findings_fold_its_symptoms_and_keep_every_kind_for_a_proposer():
    p = read_report(NCU_FIXTURES / "seed_h100_full.ncu-rep",
                    [*stage_metric_set(get_stage("memory-fusion")), *DIAGNOSIS_METRICS])
    out = diagnose(DiagnosisInput(profile=p, gpu=find_gpu("h100")))
    agent = [f.kind for f in out if f.source == "agent"]
    assert agent == ["small-grid", "spills", "memory-bound"]
    assert {"low-dram", "low-occupancy", "stalls", "imbalance"} <= kinds(out)  # folded, not lost
    gains = [f.gain_pct for f in out if f.source == "agent" and f.gain_pct is not None]
    assert gains == sorted(gains, reverse=True)  # "most valuable first" is true of the causes


# ---------------------------------------------------------------- what limits occupancy


def test_one_warp_programs_are_limited_by_the_per_sm_program_cap_not_by_shared_memory():
    """Issue 37's row: 'shared memory limits it (1.0 KB per program: 32 programs of 32 threads per SM)'. Every limit
    ncu reports is capped at 32 programs; it is the cap that binds, and more warps per program is the fix."""
    k = kernel(dram=30.0, warps=22.0, **limits(64, 32, 64), **{
        "sm__maximum_warps_per_active_cycle_pct": 50.0, "launch__block_size": 32, "launch__registers_per_thread": 30,
        "launch__shared_mem_per_block": 1024, "device__attribute_max_blocks_per_multiprocessor": 32})
    k.block = [32, 1, 1]
    [f] = [f for f in found(profile(k)) if f.kind == "low-occupancy"]
    assert "the per-SM limit of 32 programs binds (32 programs of 32 threads per SM: 32 warps)" in f.evidence
    assert f.evidence.endswith("the others allow registers 64, shared memory 32, warp slots 64, barriers 32")
    assert "shared memory limits it" not in f.evidence
    assert f.detail == "programs per SM" and f.direction.startswith("more warps per program")
    assert f.remedy == "more-programs" and {s.kind for s in f.folded} == {"low-dram"}


def test_the_program_cap_comes_from_the_gpu_catalog_where_the_report_lacks_the_device_attribute():
    assert H200.max_blocks_per_sm == 32 and find_gpu("4090").max_blocks_per_sm == 24
    k = kernel(dram=30.0, warps=22.0, **limits(24, 24, 48, 24, 24), **{
        "sm__maximum_warps_per_active_cycle_pct": 50.0, "launch__block_size": 32})
    p = Profile(gpu="4090", kernels={"k": k})
    [f] = [f for f in diagnose(DiagnosisInput(profile=p, gpu=find_gpu("4090"))) if f.kind == "low-occupancy"]
    assert f.detail == "programs per SM" and "the per-SM limit of 24 programs binds" in f.evidence


def test_a_register_limit_is_named_with_its_number_and_every_other_limit():
    k = kernel(dram=30.0, warps=10.0, **limits(2, 4, 16), **{
        "sm__maximum_warps_per_active_cycle_pct": 12.5, "launch__block_size": 128, "launch__registers_per_thread": 255})
    [f] = [f for f in found(profile(k)) if f.kind == "low-occupancy"]
    assert f.evidence.endswith("registers limit it (255 per thread: 2 programs of 128 threads per SM); the others "
                               "allow shared memory 4, warp slots 16, the per-SM program limit 32, barriers 32")
    assert f.figures["limit_registers"] == 2.0 and f.figures["limit_programs_per_SM"] == 32.0


# ---------------------------------------------------------------- launch-heavy forwards, intermediates, issue


def test_a_forward_of_2048_single_program_launches_is_launch_bound_with_its_count_duration_and_host_gap():
    """ncu profiled a sample of 8 launches (agent.profiler.PROFILED_LAUNCHES); the harness counted 2048 a forward."""
    k = kernel("row_kernel", grid=1, dram=1.0, sm=0.5, warps=3.0, seconds=8 * 6e-6, launches=8, **STALLS)
    t = Timing(candidate_ms=12.3, candidate_spread_pct=1.0, device_ms=12.3, latency_ms=32.8, launches=2048,
               repeats=10, meaningful=True)
    out = found(profile(k), t)
    first = out[0]
    assert first.kind == "launch-bound" and first.remedy == "fewer-launches"
    assert first.evidence == ("a forward makes 2048 launches of row_kernel (ncu profiled 8), 6.0 µs each on the GPU; "
                              "the host spends 10.0 µs between them (a call takes 32.800 ms, its GPU work 12.300 ms)")
    assert first.direction.startswith("fuse them into one launch")
    assert {"small-grid", "host-bound", "low-dram"} <= {s.kind for s in first.folded}  # one grid of 1 each time
    assert first.figures["host_gap_us"] == pytest.approx(10.02, abs=0.01)
    # one gain: the largest of its own (the host's 10 µs of every 16) and what it folded (131 of 132 SMs idle in
    # each single-program launch), never their sum
    assert first.gain_pct == 99.0
    # from the report alone: the sample says "at least", the host's cost per launch is the typical one
    alone = found(profile(k))[0]
    assert alone.kind == "launch-bound" and "makes at least 8 launches of row_kernel, 6.0 µs each" in alone.evidence


def test_two_kernels_passing_an_intermediate_through_dram_could_be_one():
    write = kernel("scale_kernel", dram=90.0, dram_bytes=512e6)
    write.metrics["dram__bytes_write.sum"] = 512e6
    read = kernel("sum_kernel", dram=90.0, dram_bytes=512e6)
    out = found(profile(write, read))
    assert out[0].kind == "unfused" and out[0].gain_pct == 66.7  # 1024 of the 1536 MB moved
    assert out[0].evidence.startswith("scale_kernel writes 512 MB to DRAM that sum_kernel reads back (512 MB)")
    assert "unfused" not in {f.kind for f in found(profile(kernel("a", dram=90.0), kernel("b", dram=90.0)))}


def test_int64_index_arithmetic_shows_as_instruction_issue_not_bytes():
    k = kernel(dram=30.0, sm=85.0, **STALLS, **{
        "smsp__issue_active.avg.pct_of_peak_sustained_active": 85.0, "sm__inst_executed_pipe_alu.avg.pct_of_peak_"
        "sustained_active": 70.0, "lts__throughput.avg.pct_of_peak_sustained_elapsed": 32.0,
        "smsp__inst_executed.sum": 40e6, "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 4e6})
    out = found(profile(k))
    assert out[0].kind == "issue-bound" and out[0].gain_pct == 62.4 and out[0].figures["inst_per_sector"] == 10.0
    assert {s.kind for s in out[0].folded} == {"stalls"}  # DRAM under the SMs: not "too few loads in flight"
    k.metrics["smsp__issue_active.avg.pct_of_peak_sustained_active"] = 30.0  # issue is not the limit
    assert "issue-bound" not in {f.kind for f in found(profile(k))}


# ---------------------------------------------------------------- the prompt


def test_a_prompt_shows_at_most_five_findings_root_causes_first():
    p = read_report(NCU_FIXTURES / "seed_h100_full.ncu-rep",
                    [*stage_metric_set(get_stage("memory-fusion")), *DIAGNOSIS_METRICS])
    shown = for_prompt(p, None)
    assert len(shown) == 5 and len(diagnose(DiagnosisInput(profile=p, gpu=find_gpu("h100")))) > 5
    assert [f.kind for f in shown[:2]] == ["small-grid", "spills"]
    assert all(f.source == "ncu" for f in shown[3:])  # ncu's own estimates after the causes and the roofline


def test_bank_conflicts_cost_their_replayed_wavefronts_where_warps_wait_on_shared_memory():
    """The planted PTX kernel recorded on an H100 (every thread of a warp in bank 0): 97 % of its shared wavefronts
    are conflicts and its warps wait on shared memory in all their stalls; ncu's own rule says 96.8 %."""
    from pathlib import Path

    metrics = [*stage_metric_set(get_stage("memory-fusion")), *DIAGNOSIS_METRICS]
    data = Path(__file__).parent / "data" / "ncu"
    out = diagnose(DiagnosisInput(profile=read_report(data / "planted_conflict.ncu-rep", metrics), gpu=find_gpu("h100")))
    assert out[0].kind == "bank-conflicts" and out[0].gain_pct == 96.4 and [s.kind for s in out[0].folded] == ["stalls"]
    assert "warps waiting on shared memory 100 % of their stalls" in out[0].evidence
    twin = diagnose(DiagnosisInput(profile=read_report(data / "planted_conflict_free.ncu-rep", metrics),
                                   gpu=find_gpu("h100")))
    assert "bank-conflicts" not in kinds(twin)


def test_one_warp_programs_at_the_dram_peak_raise_no_occupancy_alarm():
    """Recorded on an H200 (the first planted run, one_warp at 8 floats a thread): 24 % of the warp slots, yet DRAM at
    86 % of its peak: the warps in flight keep the bytes moving, and fewer warps are no fault there."""
    k = kernel(dram=86.0, warps=24.3, **limits(64, 32, 64), **{
        "sm__maximum_warps_per_active_cycle_pct": 50.0, "launch__block_size": 32})
    assert [f.kind for f in found(profile(k))] == ["at-dram-peak", "memory-bound"]
    k.metrics[DRAM] = 30.0
    assert found(profile(k))[0].kind == "low-occupancy"


def test_a_forward_of_two_kernels_has_one_roofline_line_for_the_longer():
    """Issue 37's first planted run: "unfused > at-dram-peak > memory-bound > memory-bound"."""
    long, short = kernel("long_kernel", dram=90.0, seconds=300e-6), kernel("short_kernel", dram=90.0, seconds=100e-6)
    out = found(profile(short, long))
    assert [(f.kind, f.kernel) for f in out if f.kind == "memory-bound"] == [("memory-bound", "long_kernel")]

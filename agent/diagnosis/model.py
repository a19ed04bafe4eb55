"""What every analyzer reads: the metric names, the input (DiagnosisInput); a finding itself is agent.finding."""

from __future__ import annotations

from agent.finding import Finding, Remedy  # the type lives with the types; analyzers take it from here
from agent.schema import GPUSpec, KernelProfile, Model, Profile, Timing

STALL_REASONS = ("long_scoreboard", "short_scoreboard", "barrier", "mio_throttle", "lg_throttle", "math_pipe_throttle",
                 "wait", "not_selected", "selected", "dispatch_stall", "no_instruction", "branch_resolving", "membar",
                 "drain", "imc_miss", "misc", "sleeping", "tex_throttle")


def stall_metric(reason: str) -> str:
    return f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio"


# What the analyzers read beyond a stage's metrics. ncu's full set has them all; a stage-set report has none of them,
# and the analyzers that need them then say nothing (agent.ncu.read_report leaves out what a report lacks).
REGISTERS = "launch__registers_per_thread"
SPILLS = "sass__inst_executed_register_spilling"
GLOBAL_LD_BYTES_PER_SECTOR = "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio"
GLOBAL_ST_BYTES_PER_SECTOR = "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio"
GLOBAL_LD_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
GLOBAL_ST_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"
LOCAL_LD_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum"  # spilled values read back
LOCAL_ST_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum"
ISSUE_ACTIVE = "smsp__issue_active.avg.pct_of_peak_sustained_active"  # cycles an instruction was issued
ALU_PIPE = "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active"  # integer and logic instructions
INSTRUCTIONS = "smsp__inst_executed.sum"
SHARED_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"
SHARED_WAVEFRONTS = "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"
WAVES = "launch__waves_per_multiprocessor"  # ncu's own count: programs / (SMs x programs one SM holds at once)
SM_ACTIVE_AVG = "sm__cycles_active.avg"
SM_ACTIVE_MAX = "sm__cycles_active.max"

# Occupancy: the share of warp slots the launch's resources allow, and each resource's limit in programs per SM
# (ncu's occupancy calculator; the smallest is the limiter). Launch statistics: free to collect, in every report.
THEORETICAL_WARPS = "sm__maximum_warps_per_active_cycle_pct"
SHARED_PER_BLOCK = "launch__shared_mem_per_block"  # bytes, the driver's reserved 1 KB included
MAX_BLOCKS_PER_SM = "device__attribute_max_blocks_per_multiprocessor"  # the per-SM program cap (sm_90: 32)
OCCUPANCY_LIMITS = {  # what limits, in the words a finding uses -> its limit in programs per SM; ties go to the first
    "registers": "launch__occupancy_limit_registers",
    "shared memory": "launch__occupancy_limit_shared_mem",
    "block size": "launch__occupancy_limit_warps",
    "programs per SM": "launch__occupancy_limit_blocks",
    "barriers": "launch__occupancy_limit_barriers",
}

# The roofline: the counters ncu's own roofline chart reads (its full set has exactly these, so a full-set report and
# a stage-set one are read the same way). FLOPs per thread instruction: add and mul 1, fma 2, fp16's packed pairs
# twice that (ncu's weights); each precision's fma rate is its peak.
FLOP_WEIGHTS: dict[str, dict[str, int]] = {
    "fp32": {"fadd": 1, "fmul": 1, "ffma": 2},
    "fp64": {"dadd": 1, "dmul": 1, "dfma": 2},
    "fp16": {"hadd": 2, "hmul": 2, "hfma": 4},
}


def flop_rate_metric(op: str) -> str:
    """Thread instructions of one op executed per elapsed cycle, summed over the SM sub-partitions."""
    return f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed"


def peak_rate_metric(op: str) -> str:
    """The most thread instructions of one op the whole GPU can execute per cycle."""
    return f"sm__sass_thread_inst_executed_op_{op}_pred_on.sum.peak_sustained"


def fma_op(precision: str) -> str:
    return max(FLOP_WEIGHTS[precision], key=FLOP_WEIGHTS[precision].__getitem__)


SM_CLOCK = "smsp__cycles_elapsed.avg.per_second"  # the clock the kernel ran at (ncu locks it to base by default)
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
DRAM_PEAK_PER_CYCLE = "dram__bytes.sum.peak_sustained"
DRAM_CLOCK = "dram__cycles_elapsed.avg.per_second"
L2 = "lts__throughput.avg.pct_of_peak_sustained_elapsed"
ROOFLINE_METRICS = [*(flop_rate_metric(op) for ops in FLOP_WEIGHTS.values() for op in ops),
                    *(peak_rate_metric(fma_op(p)) for p in FLOP_WEIGHTS), SM_CLOCK, DRAM_READ, DRAM_WRITE,
                    DRAM_PEAK_PER_CYCLE, DRAM_CLOCK, L2]

DIAGNOSIS_METRICS = [REGISTERS, SPILLS, GLOBAL_LD_BYTES_PER_SECTOR, GLOBAL_ST_BYTES_PER_SECTOR, GLOBAL_LD_SECTORS,
                     GLOBAL_ST_SECTORS, LOCAL_LD_SECTORS, LOCAL_ST_SECTORS, ISSUE_ACTIVE, ALU_PIPE, INSTRUCTIONS,
                     SHARED_CONFLICTS, SM_ACTIVE_AVG, SM_ACTIVE_MAX, WAVES,
                     SHARED_WAVEFRONTS, *(stall_metric(r) for r in STALL_REASONS),
                     THEORETICAL_WARPS, SHARED_PER_BLOCK, MAX_BLOCKS_PER_SM, *OCCUPANCY_LIMITS.values(),
                     *ROOFLINE_METRICS]


class DiagnosisInput(Model):
    """A profile with what it was taken on and, where known, the candidate's two clocks."""

    profile: Profile
    gpu: GPUSpec | None = None
    timing: Timing | None = None

    def kernels(self) -> list[KernelProfile]:
        """Kernels by GPU time, longest first."""
        from agent.ncu.metadata import DURATION

        def dur(k: KernelProfile) -> float:
            v = k.metrics.get(DURATION)
            return float(v) if isinstance(v, (int, float)) else 0.0

        return sorted(self.profile.kernels.values(), key=dur, reverse=True)

    def sms(self, k: KernelProfile) -> int | None:
        from agent.ncu.metadata import SM_COUNT

        if self.gpu is not None:
            return self.gpu.sms
        return next((int(v) for n in SM_COUNT if isinstance(v := k.metrics.get(n), (int, float))), None)

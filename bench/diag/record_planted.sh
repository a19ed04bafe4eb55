# Record each planted kernel's report with what the profiler collects for a stage (agent.profiler.ncu_argv): the
# stage's metrics, the diagnosis counters, SourceCounters. Needs a GPU and ncu; writes $OUT/planted_NAME.ncu-rep.
set -eu
export PYTHONPATH=/opt/site:$PWD
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
METRICS=$(python -c "
from agent.diagnosis import DIAGNOSIS_METRICS
from agent.ncu import stage_metric_set
from agent.stages import get_stage
m = stage_metric_set(get_stage('memory-fusion'))
print(','.join([*m, *(x for x in DIAGNOSIS_METRICS if x not in m)]))")
# The roofline's and occupancy's counters, in both forms ncu offers (a sum, and a rate with the cycles it ran):
# recorded whether or not the analyzers of this commit read them, so a later analyzer can be tested on these files.
F=""; for op in fadd fmul ffma dadd dmul dfma hadd hmul hfma; do
  F="$F,smsp__sass_thread_inst_executed_op_${op}_pred_on.sum,smsp__sass_thread_inst_executed_op_${op}_pred_on.sum.per_cycle_elapsed"
done
METRICS="$METRICS$F,smsp__cycles_elapsed.avg,smsp__cycles_elapsed.avg.per_second,sm__cycles_elapsed.avg,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_active,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,launch__occupancy_limit_warps,launch__occupancy_limit_blocks,launch__occupancy_limit_barriers,sm__maximum_warps_per_active_cycle_pct,launch__shared_mem_per_block_static,launch__shared_mem_per_block_dynamic"
for name in ${PLANTED:-strided tail spill conflict conflict_free healthy}; do
  # warm-up run outside ncu so the Triton compile is cached; ncu then sees the one planted launch
  python bench/diag/planted_kernels.py $name
  $NCU --nvtx --nvtx-include "planted/" --kernel-name "regex:^(strided_kernel|tail_kernel|spill_kernel|shared_conflict_kernel|shared_conflict_free_kernel|healthy_kernel)$" --metrics "$METRICS" \
       --section SourceCounters --section LaunchStats --section Occupancy --import-source no -f -o $OUT/planted_$name python bench/diag/planted_kernels.py $name
done
ls -la $OUT

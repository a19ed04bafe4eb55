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
for name in ${PLANTED:-strided tail spill conflict conflict_free}; do
  # warm-up run outside ncu so the Triton compile is cached; ncu then sees the one planted launch
  python bench/diag/planted_kernels.py $name
  $NCU --nvtx --nvtx-include "planted/" --kernel-name "regex:^(strided_kernel|tail_kernel|spill_kernel|shared_conflict_kernel|shared_conflict_free_kernel)$" --metrics "$METRICS" \
       --section SourceCounters --import-source no -f -o $OUT/planted_$name python bench/diag/planted_kernels.py $name
done
ls -la $OUT

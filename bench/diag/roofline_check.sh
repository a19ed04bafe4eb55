# Issue 17 on a GPU: the roofline, L2 and occupancy-limit counters that agent.diagnosis now asks ncu for.
#   bash bench/diag/roofline_check.sh      (a GPU and ncu; writes under $OUT)
# 1. ncu accepts every new metric name (a name it does not know fails the whole profile): the planted tail and strided
#    kernels recorded as the profiler records a stage (record_planted.sh) and read back;
# 2. what the new counters cost: ncu's wall time on the tail kernel with the old and the new list, three times each;
# 3. the memory-fusion best as the loop now profiles it must raise no alarm (at-dram-peak, then memory-bound, no gain).
set -u
export PYTHONPATH=/opt/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=200 NO_COLOR=1
FINAL=$OUT; OUT=/opt/roofline_out; rm -rf $OUT; mkdir -p $OUT  # the device returns 8 files: one tarball at the end
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)

echo "== 1. planted kernels with the new counters"
OUT=$OUT bash bench/diag/record_planted.sh 2>&1 | grep -E "ERROR|Failed|WARN" | head -5
for n in tail strided spill conflict conflict_free healthy; do
  echo "-- planted_$n"; python -m agent ncu $OUT/planted_$n.ncu-rep --format diagnosis | grep -E '^│ [a-z]' | cut -c1-200
  python - $OUT/planted_$n.ncu-rep <<'EOF'
import sys
from pathlib import Path
from agent.diagnosis import DIAGNOSIS_METRICS
from agent.ncu import read_report
k = next(iter(read_report(Path(sys.argv[1]), DIAGNOSIS_METRICS).kernels.values()))
missing = [m for m in DIAGNOSIS_METRICS if m not in k.metrics]
print("   diagnosis metrics missing from the report:", missing or "none")
EOF
done

echo "== 2. ncu wall time on the tail kernel, old list vs new list (s)"
python - > /tmp/lists.sh <<'EOF'
from agent.diagnosis.model import DIAGNOSIS_METRICS, OCCUPANCY_LIMITS, ROOFLINE_METRICS, SHARED_PER_BLOCK, THEORETICAL_WARPS
from agent.ncu import stage_metric_set
from agent.stages import get_stage
new = {*ROOFLINE_METRICS, *OCCUPANCY_LIMITS.values(), SHARED_PER_BLOCK, THEORETICAL_WARPS}
stage = stage_metric_set(get_stage("memory-fusion"))
full = [*stage, *(m for m in DIAGNOSIS_METRICS if m not in stage)]
print("OLD=" + ",".join(m for m in full if m not in new or m in stage))
print("NEW=" + ",".join(full))
EOF
. /tmp/lists.sh
python bench/diag/planted_kernels.py tail  # compile outside ncu
for i in 1; do
  for which in OLD NEW; do
    s=$(date +%s.%N)
    $NCU --nvtx --nvtx-include "planted/" --kernel-name "regex:^tail_kernel$" --metrics "${!which}" \
         --section SourceCounters --import-source no -f -o /tmp/cost_$which python bench/diag/planted_kernels.py tail \
         > /tmp/cost_$which.log 2>&1
    echo "$which run $i: $(python -c "import time; print(round(time.time() - $s, 2))") s, $(grep -oE '[0-9]+ passes' /tmp/cost_$which.log | tail -1)"
  done
done
grep -E "ERROR|Failed" /tmp/cost_NEW.log | head -3

echo "== 3. the memory-fusion best, profiled by the loop with the new counters"
R=/opt/d17r-$(date +%s); mkdir -p $R
python -m agent run --llm offline --iterations 1 --samples 4 --root $R --quiet 2>&1 | tail -3
RUN=$(python -m agent runs --root $R --json | python -c "import json,sys; print(json.load(sys.stdin)[0]['id'])")
for f in $R/profiles/$RUN/*.ncu-rep; do
  echo "-- $f"; python -m agent ncu $f --format diagnosis | grep -E '^│ [a-z]' | cut -c1-200; cp $f $OUT/
done
ls -la $OUT
tar czf $FINAL/roofline.tar.gz -C $OUT .

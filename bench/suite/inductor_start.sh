# Issue 21 item 3 on a GPU: torch.compile's own kernels as a starting answer (agent.inductor). For gap44 and two other
# built-in problems: capture what Inductor generates at the problem's GPU sizes (a sandboxed "inductor" worker),
# translate it into a ModelNew, and judge that with `agent eval` on both clocks against eager and torch.compile:
#   - stage correctness (no fusion rule): verdict, device/latency ms, speedups vs eager and vs torch.compile;
#   - stage memory-fusion: its verdict only (its intermediate rule refuses the channels-last copy of a conv's input
#     where that copy is over 1/8 of the conv's output: gap44's odd size, 0.128; issue 21 item 2 is to allow it).
# Then `agent run --start both --iterations 0` on gap44: iteration 0 judges the problem's start and the Inductor one.
# Everything lands in $OUT (starts, eval JSON, logs) plus a summary on stdout.
# Usage (GPU machine, repo root): bash bench/suite/inductor_start.sh [PROBLEM ...]   (default: gap44 conv2d_gap_bias_lse conv3d_gap)
set -u
export PYTHONPATH=/opt/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160 NO_COLOR=1
OUT=${OUT:-./inductor_out}; mkdir -p $OUT
R=/var/tmp/agent-inductor-check; rm -rf $R; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a $OUT/gpu.txt
PROBLEMS=${*:-gap44 conv2d_gap_bias_lse conv3d_gap}
for P in $PROBLEMS; do
  echo "== $P: capture and translate"; t0=$(date +%s)
  python - $P $OUT/start_$P.py <<'PY' 2> $OUT/start_$P.err
import sys
from agent.inductor.start import start_from_inductor
from agent.problems import load_problem
text = start_from_inductor(load_problem(sys.argv[1]), "cuda")
open(sys.argv[2], "w").write(text)
print(f"   {len(text)} chars, {text.count('@triton.jit')} jit functions")
PY
  echo "   rc=$? in $(( $(date +%s) - t0 )) s"; tail -2 $OUT/start_$P.err
  [ -s $OUT/start_$P.py ] || continue
  for S in ${STAGES:-correctness memory-fusion}; do
    python -m agent eval $OUT/start_$P.py --problem $P --stage $S --device cuda --json \
      > $OUT/eval_${P}_$S.json 2> $OUT/eval_${P}_$S.err
    echo "-- $P $S rc=$?"; python - $OUT/eval_${P}_$S.json <<'PY'
import json, sys
try:
    e = json.load(open(sys.argv[1]))
except Exception as x:
    print("   unreadable:", x); raise SystemExit
t = e.get("timing") or {}
print("  ", e["verdict"], (e.get("message") or "")[:200])
if t:
    for k in ("device_ms", "device_spread_pct", "latency_ms", "latency_spread_pct", "launches", "eager_device_ms",
              "eager_latency_ms", "compile_device_ms", "compile_latency_ms", "device_speedup_vs_eager",
              "latency_speedup_vs_eager", "device_speedup_vs_compile", "latency_speedup_vs_compile"):
        print(f"   {k} {t.get(k)}")
PY
  done
done
echo "== gap44: agent run --start both --iterations 0 (stage correctness)"
python -m agent run --problem gap44 --stage correctness --start both --iterations 0 --llm offline --device cuda \
  --root $R --json > $OUT/run_start_both.jsonl 2> $OUT/run_start_both.err; echo "rc=$?"; tail -3 $OUT/run_start_both.err
grep -E '"event": "(message|candidate)' $OUT/run_start_both.jsonl | cut -c1-400
python -m agent leaderboard --root $R --all > $OUT/leaderboard.txt 2>&1; head -12 $OUT/leaderboard.txt
ls -la $OUT

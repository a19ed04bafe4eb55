# The offline proposer's tail after the pool (agent/offline/tail.py) on a GPU: conv2d_gap_bias_lse and KernelBench
# #42 (conv -> GAP -> + bias -> logsumexp over the channels [-> sum -> x 10]) used to end every candidate in PyTorch
# (rule violation: "the tensor forward returned ... was never given to a Triton kernel"). Each problem gets
# `agent run --stage auto --llm offline` (2 iterations x 4 samples) on the GPU; expected: every candidate's verdict
# "correct" (none "rule_violation"), a best on both clocks, and the tail kernel `rows_tail_kernel` in its profile.
# Everything lands in $OUT (run logs, leaderboard, the best's code) plus a summary on stdout.
# Usage (GPU machine, repo root): bash bench/checks/offline_tail.sh [PROBLEM ...]
set -u
export PYTHONPATH=/opt/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160 NO_COLOR=1
OUT=${OUT:-./tail_out}; mkdir -p $OUT
R=/var/tmp/agent-tail-check; rm -rf $R; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
PROBLEMS=${*:-conv2d_gap_bias_lse kb_42_convt2d_gap_bias_lse_sum_mul}
for P in $PROBLEMS; do
  echo "== $P: agent run --stage auto --llm offline"; t0=$(date +%s)
  python -m agent run --problem $P --stage auto --llm offline --device cuda --iterations 2 --samples 4 \
    --root $R/$P --json > $OUT/run_$P.jsonl 2> $OUT/run_$P.err
  echo "   rc=$? in $(( $(date +%s) - t0 )) s"; tail -2 $OUT/run_$P.err
  python - $OUT/run_$P.jsonl <<'PY'
import collections, json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cands = [e for e in lines if e.get("event") == "candidate"]
print("   verdicts:", dict(collections.Counter(c.get("verdict") for c in cands)))
for c in cands:
    if c.get("verdict") != "correct":
        print("   ", c.get("candidate"), c.get("verdict"), (c.get("message") or "")[:200])
print("   best:", lines[-1].get("best") if lines else None)
PY
  python -m agent leaderboard --root $R/$P --all > $OUT/leaderboard_$P.txt 2>&1; head -8 $OUT/leaderboard_$P.txt
  B=$(python -c "import json,sys; print(json.loads([l for l in open(sys.argv[1]) if l.strip()][-1]).get('best') or '')" $OUT/run_$P.jsonl)
  [ -n "$B" ] && python -m agent export $B -o $OUT/best_$P.py --root $R/$P > /dev/null 2>&1 && \
    python -m agent show $B --root $R/$P > $OUT/show_best_$P.txt 2>&1 && grep -c rows_tail $OUT/best_$P.py
done
ls -la $OUT

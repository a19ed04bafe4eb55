# Issue 17 on a GPU: the gap44 goal and the planted reports still missing. Everything lands in $OUT/goal.tar.gz
# (the device returns at most 8 files) plus a short summary on stdout.
#  1. the two-launch and the one-launch algebraic rewrites judged by `agent eval` (both clocks, eager, compile);
#  2. `--stage auto` with the offline proposer; its best exported and judged again in a fresh process;
#  3. planted reports (bench/diag/record_planted.sh): strided, tail, spill, bank conflicts and their conflict-free
#     twin, a healthy row sum.
#  Before all that, bench/diag/launch_cost.py (host cost per launch; the closed form's tile sweep).
# Usage (GPU machine, repo root): bash bench/suite/gap44_goal.sh [RUN_SECONDS]
set -u
export PYTHONPATH=/opt/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160 NO_COLOR=1
R=/opt/goal17; W=/opt/goal17_out; rm -rf $R $W; mkdir -p $R $W
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $W/gpu.txt
echo "== launch cost and tile sweep"
python bench/diag/launch_cost.py $W/launch_cost.json 2>&1 | grep -v Warning | grep -v "^{'BH'" | tail -12
echo "== eval: two launches, one launch"
for c in gap44_algebraic_one_launch; do
  python -m agent eval bench/candidates/$c.py --problem gap44 --stage algebraic --json > $W/eval_$c.json 2> $W/eval_$c.err
  echo "$c rc=$?"; python - $W/eval_$c.json <<'PY'
import json, sys
try:
    e = json.load(open(sys.argv[1]))
except Exception as x:
    print("  unreadable:", x); raise SystemExit
t = e.get("timing") or {}
print("  ", e["verdict"], (e.get("message") or "")[:160])
for k in ("device_ms", "device_spread_pct", "latency_ms", "latency_spread_pct", "launches", "eager_device_ms",
          "eager_latency_ms", "compile_device_ms", "compile_latency_ms", "device_speedup_vs_eager",
          "latency_speedup_vs_eager", "device_speedup_vs_compile", "latency_speedup_vs_compile"):
    print(f"   {k} {t.get(k)}")
PY
done
echo "== auto run"; date +%s > $W/t0
timeout ${1:-300} python -m agent run --stage auto --llm offline --iterations 9 --samples 3 --patience 1 \
  --root $R --device cuda --json > $W/auto_run.jsonl 2> $W/auto_run.err; echo "rc=$?"; date +%s > $W/t1
tail -4 $W/auto_run.err
python -m agent leaderboard --root $R --json > $W/leaderboard.json 2>&1
python -m agent leaderboard --root $R > $W/leaderboard.txt 2>&1; head -14 $W/leaderboard.txt
BEST=$(python -c "import json; print(json.load(open('$W/leaderboard.json'))[0]['candidate'])")
echo "best $BEST"
python -m agent export $BEST -o $W/best.py --root $R
python -m agent show $BEST --root $R > $W/best_show.txt 2>&1
echo "== best judged again in a fresh process"
python -m agent eval $W/best.py --problem gap44 --stage algebraic --json > $W/best_eval.json 2> $W/best_eval.err
echo "rc=$?"
python -c "
import json; t = json.load(open('$W/best_eval.json'))['timing']
print({k: t[k] for k in ('device_ms', 'latency_ms', 'launches', 'device_speedup_vs_eager', 'latency_speedup_vs_eager', 'device_speedup_vs_compile', 'latency_speedup_vs_compile')})"
for f in $(find $R/profiles -name '*.ncu-rep' | head -20); do cp $f $W/; done
for f in $W/*.ncu-rep; do echo "-- $f"; python -m agent ncu $f --format diagnosis 2>&1 | head -8; done
echo "== planted"
[ -n "${SKIP_PLANTED:-}" ] || OUT=$W bash bench/diag/record_planted.sh > $W/record_planted.log 2>&1; echo "record rc=$?"; tail -9 $W/record_planted.log
for f in $W/planted_*.ncu-rep; do echo "-- $f"; python -m agent ncu $f --format diagnosis 2>&1 | grep "│ [a-z]" | cut -c1-150 | head -6; done
tar czf $OUT/goal.tar.gz -C $W . && ls -la $OUT

# Issue 17 on a GPU: the gap44 goal (`--stage auto` with the offline proposer; its best exported and judged again by
# `agent eval` in a fresh process, both clocks) and the planted reports still missing (spills, bank conflicts).
# Writes everything under $OUT. Usage: bash bench/gpu_goal_check.sh [RUN_SECONDS]
set -u
export PYTHONPATH=/opt/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160 NO_COLOR=1
R=/opt/goal17; rm -rf $R; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
echo "== auto run"; date +%s > $OUT/t0
timeout ${1:-330} python -m agent run --stage auto --llm offline --iterations 9 --samples 3 --patience 1 \
  --root $R --device cuda --json > $OUT/auto_run.jsonl 2> $OUT/auto_run.err; echo "rc=$?"; date +%s > $OUT/t1
tail -3 $OUT/auto_run.err
python -m agent leaderboard --root $R --json > $OUT/leaderboard.json 2>&1
python -m agent runs --root $R > $OUT/runs.txt 2>&1; cat $OUT/runs.txt | tail -4
BEST=$(python -c "import json; print(json.load(open('$OUT/leaderboard.json'))[0]['candidate'])")
echo "best $BEST"
python -m agent export $BEST -o $OUT/best.py --root $R
python -m agent show $BEST --root $R > $OUT/best_show.txt 2>&1
echo "== eval in a fresh process"
python -m agent eval $OUT/best.py --stage algebraic --json > $OUT/best_eval.json 2> $OUT/best_eval.err; echo "rc=$?"
python - <<'PY'
import json, os
e = json.load(open(os.environ["OUT"] + "/best_eval.json"))
print(json.dumps(e, indent=1)[:3000])
PY
for f in $(find $R/profiles -name '*.ncu-rep' | head -40); do cp $f $OUT/ 2>/dev/null; done
echo "== planted"
PLANTED="spill conflict conflict_free" bash bench/diag/record_planted.sh 2>&1 | tail -8
for n in spill conflict conflict_free; do echo "-- $n"; python -m agent ncu $OUT/planted_$n.ncu-rep --format diagnosis 2>&1 | head -12; done

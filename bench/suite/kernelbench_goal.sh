# Issue 21 item 4 on a GPU: for each KernelBench look-alike (agent/data/kernelbench/), the offline `--stage auto`
# run with torch.compile's own kernels as a second start (`--start both`), ranked on the device clock; its best
# exported and judged again by `agent eval` in a fresh process, at the best's own stage, on both clocks against eager
# and torch.compile. One JSON per problem in $OUT (kb_<stem>.json), the logs in $OUT/kb_logs.tar.gz; the table:
#   python bench/suite/kernelbench_tables.py $OUT
# Usage (GPU machine, repo root): bash bench/suite/kernelbench_goal.sh [STEM ...]   (default: all eight)
# Settings (environment): ITERATIONS=6 SAMPLES=3 MINUTES=3 (--max-minutes: no round starts after it) DEVICE=cuda
#   PRECISION=fp32 (--precision of the run and of the re-check; tf32: a tolerance floor of 2e-3 for both)
set -u
export PYTHONPATH=${PYTHONPATH:-/opt/site}:$PWD PYTHONUNBUFFERED=1 COLUMNS=160 NO_COLOR=1
OUT=${OUT:-./kb_out}; mkdir -p "$OUT"
W=${WORK:-/var/tmp/agent-kb}  # not under /tmp: candidates see /tmp as a private tmpfs
ITERATIONS=${ITERATIONS:-6}; SAMPLES=${SAMPLES:-3}; MINUTES=${MINUTES:-3}; DEVICE=${DEVICE:-cuda}
export PRECISION=${PRECISION:-fp32}
STEMS=${*:-$(cd agent/data/kernelbench && ls kb_*.py | sed 's/\.py$//')}
mkdir -p "$W"
for P in $STEMS; do
  R=$W/$P; rm -rf "$R"; mkdir -p "$R"; t0=$(date +%s)
  echo "== $P"
  python -m agent run --problem "$P" --stage auto --start both --llm offline --objective device \
    --iterations "$ITERATIONS" --samples "$SAMPLES" --patience 1 --max-minutes "$MINUTES" --device "$DEVICE" \
    --precision "$PRECISION" \
    --root "$R" --json > "$W/$P.jsonl" 2> "$W/$P.err"
  echo "run rc=$? in $(( $(date +%s) - t0 )) s"; tail -2 "$W/$P.err"
  python -m agent leaderboard --root "$R" --json > "$W/$P-leaderboard.json" 2> /dev/null
  python -m agent leaderboard --root "$R" --all > "$W/$P-leaderboard.txt" 2>&1; head -9 "$W/$P-leaderboard.txt"
  read -r BEST STAGE < <(python -c "
import json, sys
rows = [r for r in json.load(open(sys.argv[1])) if r.get('run_best')]
print(rows[0]['candidate'], rows[0]['stage']) if rows else print('- -')" "$W/$P-leaderboard.json" 2>/dev/null || echo "- -")
  if [ "$BEST" = "-" ]; then
    python bench/suite/kernelbench_tables.py record "$P" "$W/$P.jsonl" "" "" "" "$OUT/kb_$P.json"; continue
  fi
  python -m agent export "$BEST" -o "$W/$P-best.py" --root "$R"
  python -m agent show "$BEST" --root "$R" --no-pager > "$W/$P-best-show.txt" 2>&1
  python -m agent show "$BEST" --root "$R" --json > "$W/$P-best-show.json" 2> /dev/null
  python -m agent eval "$W/$P-best.py" --problem "$P" --stage "$STAGE" --device "$DEVICE" --precision "$PRECISION" --json \
    > "$W/$P-recheck.json" 2> "$W/$P-recheck.err"; echo "recheck rc=$?"
  python bench/suite/kernelbench_tables.py record "$P" "$W/$P.jsonl" "$W/$P-recheck.json" "$BEST" "$W/$P-best-show.json" "$OUT/kb_$P.json"
done
tar czf "$OUT/kb_logs.tar.gz" --exclude='*.ncu-rep' --exclude='*.sqlite*' -C "$W" . 2>/dev/null
python bench/suite/kernelbench_tables.py table "$OUT" | tee "$OUT/kb_table.md"

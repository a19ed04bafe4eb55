# Issue 18 on a GPU: greedy, beam and tree side by side with the offline proposer and one candidate budget.
# For each problem given (default: every built-in one, `agent problems`), one `agent run` per search, in one store per
# problem (the truths and baselines are computed once); each run's figures go to $OUT/search_<problem>_<search>.json
# (bench/suite/search_tables.py record: one file per run, so the files of several calls can be gathered in one folder),
# and at the end the markdown table is printed and written to $OUT/search_tables.md (bench/suite/search_tables.py table:
# from the JSON, never typed).
#
# Usage (GPU machine, repo root):
#   bash bench/suite/search.sh [PROBLEM ...]
# Settings (environment): SEARCHES="greedy beam tree"  BUDGET=15 (proposals a run)  SAMPLES=3  STAGE=auto
#   PATIENCE=2  RUN_MINUTES=2.5 (--max-minutes: no round starts after it; a cut run shows in the table's note)
#   DEVICE=cuda (cpu: a smoke test of this script without a GPU)
# One problem with the defaults takes about 3 x (2.5 min + a round) on an H100: run gap44 first, then the others one
# call each (`bash bench/suite/search.sh conv2d_gap_bias_lse`, ...; SEARCHES=tree for one search), gather the
# JSON files of all calls in one folder and print the whole table with
#   python bench/suite/search_tables.py table FOLDER
set -u
export PYTHONPATH=${PYTHONPATH:-/opt/site}:$PWD PYTHONUNBUFFERED=1 COLUMNS=160 NO_COLOR=1
OUT=${OUT:-./search_out}; mkdir -p "$OUT"
SEARCHES=${SEARCHES:-greedy beam tree}; BUDGET=${BUDGET:-15}; SAMPLES=${SAMPLES:-3}; STAGE=${STAGE:-auto}
PATIENCE=${PATIENCE:-2}; RUN_MINUTES=${RUN_MINUTES:-2.5}; DEVICE=${DEVICE:-cuda}
W=${WORK:-/var/tmp/agent-search}  # not under /tmp: candidates see /tmp as a private tmpfs
PROBLEMS=${*:-$(python -c "from agent.problems import list_problems; print(' '.join(p if isinstance(p, str) else p.name for p in list_problems()))")}
[ "$DEVICE" = cuda ] && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
for P in $PROBLEMS; do
  R=$W/$P; rm -rf "$R"; mkdir -p "$R"
  for S in $SEARCHES; do
    echo "== $P $S"
    t0=$(date +%s.%N)
    timeout $(python -c "print(int($RUN_MINUTES * 60 + 240))") python -m agent run --problem "$P" --stage "$STAGE" \
      --llm offline --search "$S" --samples "$SAMPLES" --iterations 1000 --patience "$PATIENCE" \
      --max-candidates "$BUDGET" --max-minutes "$RUN_MINUTES" --device "$DEVICE" --gpu auto --root "$R" --json \
      > "$W/$P-$S.jsonl" 2> "$W/$P-$S.err"
    echo "rc=$?"; t1=$(date +%s.%N)
    tail -2 "$W/$P-$S.err"
    RUN=$(python -c "import json,sys; print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])['run'])" \
          "$W/$P-$S.jsonl" 2>/dev/null || python -c "
from agent.store import Store; print(Store('$R').list_runs()[0].id)")
    rm -f "$OUT/search_${P}_$S.json"
    python bench/suite/search_tables.py record "$R" "$RUN" "$S" "$(python -c "print($t1 - $t0)")" "$OUT/search_${P}_$S.json"
    python -m agent leaderboard --run "$RUN" --root "$R" --limit 5 2>&1 | head -12
  done
done
python bench/suite/search_tables.py table "$OUT" | tee "$OUT/search_tables.md"

# Issue 18's comparison in one device call: bench/suite/search.sh for each problem on its own GPU, side by side
# (CUDA_VISIBLE_DEVICES=i: every ratio is between measurements on one GPU; no two runs share a GPU's timing).
# Usage (GPU machine with N GPUs, repo root): bash bench/suite/search_parallel.sh [PROBLEM ...]  (default: every
# built-in problem; problem i goes to GPU i mod N, those sharing a GPU run one after another)
# Settings: those of search.sh (SEARCHES BUDGET SAMPLES STAGE PATIENCE RUN_MINUTES), and LIMIT_S (default
# 570: each GPU's list is stopped there, so a 10-minute call still returns its files). With 4 GPUs, BUDGET=12 and
# RUN_MINUTES=2.5, the four built-in problems take about 3 x 3 minutes of wall time.
set -u
export PYTHONPATH=${PYTHONPATH:-/opt/site}:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-./search_out}; mkdir -p "$OUT"; LIMIT_S=${LIMIT_S:-570}
PROBLEMS=${*:-$(python -c "from agent.problems import list_problems; print(' '.join(p if isinstance(p, str) else p.name for p in list_problems()))")}
N=$(nvidia-smi -L | wc -l); [ "$N" -ge 1 ] || { echo "no GPU"; exit 2; }
declare -a LISTS
i=0; for P in $PROBLEMS; do LISTS[$((i % N))]="${LISTS[$((i % N))]:-} $P"; i=$((i + 1)); done
for g in "${!LISTS[@]}"; do
  ( export CUDA_VISIBLE_DEVICES=$g; mkdir -p "$OUT/gpu$g"
    OUT="$OUT/gpu$g" WORK="/var/tmp/agent-search-$g" timeout "$LIMIT_S" bash bench/suite/search.sh ${LISTS[$g]} \
      > "$OUT/gpu$g/log.txt" 2>&1 ) &
done
wait
mkdir -p "$OUT/all"; cp "$OUT"/gpu*/search_*.json "$OUT/all/" 2>/dev/null
tar czf "$OUT/search_logs.tar.gz" --exclude='*.ncu-rep' --exclude='*.sqlite*' /var/tmp/agent-search-* 2>/dev/null
python bench/suite/search_tables.py table "$OUT/all" | tee "$OUT/search_tables.md"

# The GPU checks that assert verdicts and behaviour, back to back in one device call (a session's device time is short
# and a fresh machine costs minutes). Each check writes under its own folder of $OUT and its log to $OUT/<check>.log;
# a check that fails does not stop the others; one summary line each (the check's last line).
#   probes          bench/checks/tracer_probes.py: the recorder's mechanisms (allocations, the watch tell, foreign
#                   launch arguments, kernel sources)
#   kb              bench/checks/manifest_verdicts.py --time, every case judged at a KernelBench look-alike
#   other           the same for the cases at the other built-in and manifest problems (not gap44, not kb_*)
#   gap44:K/N       the same for the K-th of N parts of the gap44 cases (219 of them: one part of 3 per call)
#   rest:K/N        every problem but gap44, the K-th of N groups of problems, verdicts only (no timing). On a
#                   4-GPU machine all four groups at once, one GPU each, took 199 s (BENCHMARKS §20):
#                     for k in 1 2 3 4; do CUDA_VISIBLE_DEVICES=$((k-1)) OUT=$OUT/g$k bash $0 rest:$k/4 & done; wait
#   window          bench/suite/window_families.sh: the offline window families against eager and torch.compile
# Usage (GPU machine, repo root, wheels installed to /opt/site): bash bench/checks/on_gpu.sh [CHECK ...]
#   default: probes kb other. Give each long check its own call: kb's seven problems each time their baselines at full
#   size (the former legit8 alone took over 9 minutes on an H100).
set -u
export PYTHONPATH=${PYTHONPATH:-/opt/site}:$PWD NO_COLOR=1 COLUMNS=160 PYTHONUNBUFFERED=1
OUT=${OUT:-./on_gpu_out}; mkdir -p "$OUT"
PROBLEMS=$(python - <<'PY'
import tomllib
m = tomllib.load(open("tests/candidates/manifest.toml", "rb"))
print(" ".join(sorted({c.get("problem", "gap44") for c in m.values()})))
PY
)
for C in ${*:-probes kb other}; do
  N=${C//[:\/]/_}; D=$OUT/$N; mkdir -p "$D"; t0=$(date +%s)
  case $C in
    probes) OUT=$D python bench/checks/tracer_probes.py > "$OUT/$N.log" 2>&1 ;;
    window) OUT=$D bash bench/suite/window_families.sh > "$OUT/$N.log" 2>&1 ;;
    kb) P=$(for p in $PROBLEMS; do case $p in kb_*) echo "--problem $p";; esac; done)
        python bench/checks/manifest_verdicts.py --time $P --out "$D" > "$OUT/$N.log" 2>&1 ;;
    other) P=$(for p in $PROBLEMS; do case $p in kb_*|gap44) ;; *) echo "--problem $p";; esac; done)
           python bench/checks/manifest_verdicts.py --time $P --out "$D" > "$OUT/$N.log" 2>&1 ;;
    rest:*) # every problem but gap44, the K-th of N groups of them, judged without timing (their full-size truths
            # take minutes each: 42 answers at 14 problems did not fit one call)
            K=${C#rest:}; K0=${K%/*}; KN=${K#*/}; i=0
            P=$(for p in $PROBLEMS; do [ "$p" = gap44 ] && continue; i=$((i + 1))
                  [ $(( (i - 1) % KN )) -eq $((K0 - 1)) ] && echo "--problem $p"; done)
            python bench/checks/manifest_verdicts.py $P --out "$D" > "$OUT/$N.log" 2>&1 ;;
    gap44:*) python bench/checks/manifest_verdicts.py --time --problem gap44 --part "${C#gap44:}" --out "$D" \
               > "$OUT/$N.log" 2>&1 ;;
    *) echo "unknown check: $C (probes, kb, other, gap44:K/N, rest:K/N, window)"; continue ;;
  esac
  echo "== $C rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/$N.log")"
done

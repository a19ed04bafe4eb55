# Every GPU check that CPU mode cannot stand in for and no session has run yet, in one call (the device time of a
# session is short and a fresh machine costs minutes: one call, back to back). Each check writes under its own
# folder of $OUT and its log to $OUT/<check>.log; a check that fails does not stop the others.
#   red7, legit7 (sixth session), red8, legit8 (seventh), red9, legit9 (eighth): hostile and honest answers near the trust boundary's
#   changes, each script's last line "all as expected" or the cases that were not;
#   ablation (issue 34): the ablated call on a GPU (launch arguments destroyed, not stores), honest small ops after
#   the kernels, the memory-counted work share, memory-fusion's summed writes;
#   window: the offline window families (kb_96 pool_fused against torch.compile's 4.546 ms device on an H100).
# Usage (GPU machine, repo root, wheels installed to /opt/site): bash bench/gpu_pending.sh [CHECK ...]
#   CHECKS default: ablation red9 legit9 legit8 red7 legit7 (the order of what is least covered elsewhere; red8 and window
#   ran in the eighth session: red8 all as expected; every pool variant correct, pool_fused measured by the goal run, BENCHMARKS §13)
# Measured on an H100 (eighth session): more than one call's 10 minutes in all. Beside legit8, red8 took about 9 minutes
# (10 gap44 answers and their baselines); legit8 needs more than 9 (seven problems, each with its own
# baselines at full size: CASES="a b" runs a subset, kb23 + kb77 took 142 s); four checks at once finished none in 9.5
# minutes. Give each check its own call.
set -u
export PYTHONPATH=${PYTHONPATH:-/opt/site}:$PWD NO_COLOR=1 COLUMNS=160 PYTHONUNBUFFERED=1
OUT=${OUT:-./pending_out}; mkdir -p "$OUT"
for C in ${*:-ablation red9 legit9 legit8 red7 legit7}; do
  D=$OUT/$C; mkdir -p "$D"; t0=$(date +%s)
  case $C in
    window) OUT=$D bash bench/gpu_window_check.sh > "$OUT/$C.log" 2>&1 ;;
    *) OUT=$D python "bench/gpu_${C}_check.py" > "$OUT/$C.log" 2>&1 ;;
  esac
  echo "== $C rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/$C.log")"
done

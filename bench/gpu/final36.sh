#!/usr/bin/env bash
# The last device call of a session (issue 36): the final code once more, four jobs at once, one GPU each, every job
# under a wall limit so the archive is written inside the call: memory-fusion cold twice, --stage auto cold, and
# bench/diag/first_verdict.py cold then warm (the same --cache). Usage: OUT=... bash bench/gpu/final36.sh [LIMIT_S]
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /opt/site \
  $(ls .whl2/*.whl | grep -v numpy) > /dev/null 2>&1
export PYTHONPATH=$PWD:/opt/site NO_COLOR=1 COLUMNS=160 PYTHONUNBUFFERED=1
OUT=${OUT:-./final_out}; S=${1:-185}
mj() { g=$1; label=$2; shift 2; mkdir -p "$OUT/g$g"
  CUDA_VISIBLE_DEVICES=$g python bench/suite/main_job.py --label "$label" --timeout "$S" --root "/opt/f$g" \
    --out "$OUT/g$g" -- "$@" > "$OUT/g$g/$label.log" 2>&1; echo "== g$g $label rc=$?" >> "$OUT/summary.txt"; }
mj 0 mf_cold --stage memory-fusion --device cuda &
mj 1 auto_cold --stage auto --device cuda &
mj 3 mf_cold_b --stage memory-fusion --device cuda &
( mkdir -p "$OUT/g2"; for k in 1 2; do CUDA_VISIBLE_DEVICES=2 OUT="$OUT/g2" timeout "$S" python bench/diag/first_verdict.py \
    --cache /opt/fv > "$OUT/g2/first_verdict$k.log" 2>&1; echo "== g2 first_verdict$k rc=$?" >> "$OUT/summary.txt"; done ) &
wait
tar czf "$OUT/all.tgz" -C "$OUT" g0 g1 g2 g3; rm -rf "$OUT"/g0 "$OUT"/g1 "$OUT"/g2 "$OUT"/g3

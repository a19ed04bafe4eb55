#!/usr/bin/env bash
# Issue 36's figures in one device call on a 4-GPU machine, one job per GPU (CUDA_VISIBLE_DEVICES: each job its own
# GPU lock and clocks). Each GPU's SM clock is read before and after every job (a killed ncu may leave base clocks).
#   GPU 0: memory-fusion cold, then warm (same --root)     GPU 1: --stage auto cold, then warm
#   GPU 2: bench/diag/first_verdict.py (cold and warm, without and with a profile run beside), tests/test_gpu.py
#   GPU 3: memory-fusion cold and warm again
# Usage (repo root, wheels in .whl2): OUT=... bash bench/gpu/batch36.sh [MF_S AUTO_S]
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /opt/site \
  $(ls .whl2/*.whl | grep -v numpy) > /dev/null 2>&1
export PYTHONPATH=$PWD:/opt/site NO_COLOR=1 COLUMNS=160 PYTHONUNBUFFERED=1
OUT=${OUT:-./batch_out}; MF_S=${1:-230}; AUTO_S=${2:-240}
clk() { echo "$1 $(date +%T) $(nvidia-smi -i "$2" --query-gpu=clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader)"; }
job() {  # GPU NAME command...
  local g=$1 name=$2; shift 2; mkdir -p "$OUT/g$g"
  clk "before $name" "$g" >> "$OUT/g$g/clocks.txt"
  local t0; t0=$(date +%s)
  CUDA_VISIBLE_DEVICES=$g "$@" > "$OUT/g$g/$name.log" 2>&1
  echo "== g$g $name rc=$? in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/summary.txt"
  clk "after $name" "$g" >> "$OUT/g$g/clocks.txt"
}
mj() { python bench/suite/main_job.py "$@"; }
( job 0 mf_cold mj --label mf_cold --timeout "$MF_S" --root /opt/mj0 --out "$OUT/g0" -- --stage memory-fusion --device cuda
  job 0 mf_warm mj --label mf_warm --debug --timeout "$MF_S" --root /opt/mj0 --out "$OUT/g0" -- --stage memory-fusion \
    --device cuda ) &
( job 1 auto_cold mj --label auto_cold --timeout "$AUTO_S" --root /opt/mj1 --out "$OUT/g1" -- --stage auto --device cuda
  job 1 auto_warm mj --label auto_warm --timeout "$AUTO_S" --root /opt/mj1 --out "$OUT/g1" -- --stage auto --device cuda ) &
( for k in 1 2; do job 2 "first_verdict$k" env OUT="$OUT/g2" python bench/diag/first_verdict.py --cache /opt/fv; done
  for k in 1 2; do job 2 "first_verdict_ncu$k" env OUT="$OUT/g2" python bench/diag/first_verdict.py --cache /opt/fvn \
    --profile-run; done
  job 2 gpu_tests python -m pytest -q -s -m gpu tests/test_gpu.py ) &
( job 3 mf_cold2 mj --label mf_cold2 --timeout "$MF_S" --root /opt/mj3 --out "$OUT/g3" -- --stage memory-fusion --device cuda
  job 3 mf_warm2 mj --label mf_warm2 --timeout "$MF_S" --root /opt/mj3 --out "$OUT/g3" -- --stage memory-fusion --device cuda ) &
wait
tar czf "$OUT/all.tgz" -C "$OUT" --exclude all.tgz --exclude summary.txt g0 g1 g2 g3; find "$OUT" -mindepth 1 -maxdepth 1 ! -name all.tgz ! -name summary.txt -exec rm -rf {} +

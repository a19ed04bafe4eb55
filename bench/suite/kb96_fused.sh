# Issue 21, kb_96 (ConvTranspose3d -> x -> MaxPool3d -> GAP -> clamp): the fused transposed-conv answer
# (bench/candidates/kb96_fused_convt3d.py, correct in CPU mode on 7 trials, error 5.4e-7) judged on a GPU against
# eager and torch.compile (4.546 ms on an H100 in the fifth session), with block/warp variants written from it.
# Usage (GPU machine, repo root): bash bench/suite/kb96_fused.sh     Results: $OUT/kb96_fused.json and .txt
# Look for: each variant's verdict (correct), device and latency ms, and the speedup against torch.compile.
set -u
export PYTHONPATH=${PYTHONPATH:-/opt/site}:$PWD NO_COLOR=1 COLUMNS=160
OUT=${OUT:-./kb96_out}; V=$OUT/kb96_variants; mkdir -p "$V"
SRC=bench/candidates/kb96_fused_convt3d.py
for bp in 32 64 128; do
  for nw in 2 4 8; do
    sed -e "s/BLOCK_P = 64 if x.is_cuda/BLOCK_P = $bp if x.is_cuda/" -e "s/BLOCK_C=BLOCK_C, num_warps=4,$/BLOCK_C=BLOCK_C, num_warps=$nw,/" \
      "$SRC" > "$V/kb96_p${bp}_w${nw}.py"
  done
done
python -m agent eval "$V" --problem kb_96_convt3d_mul_maxpool_gap_clamp --stage correctness --json \
  > "$OUT/kb96_fused.json" 2> "$OUT/kb96_fused.err"
echo "rc=$?"
python - "$OUT/kb96_fused.json" <<'PY' | tee "$OUT/kb96_fused.txt"
import json, sys
rows = json.load(open(sys.argv[1]))
rows = rows if isinstance(rows, list) else rows.get("results", [rows])
for r in rows:
    t = r.get("timing") or {}
    print(f"{str(r.get('file', '?')).split('/')[-1]:22s} {r.get('verdict'):14s} device {t.get('device_ms')} "
          f"latency {t.get('latency_ms')} x compile (device) {t.get('device_speedup_vs_compile')} "
          f"(latency) {t.get('latency_speedup_vs_compile')} | {str(r.get('message'))[:90]}")
PY

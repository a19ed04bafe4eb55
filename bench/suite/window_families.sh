# Issue 21, the window families (agent/offline: a max-pool of tiling windows before the mean): every `pool_fused`
# variant for kb_96 (ConvTranspose3d computed window by window in the kernel, the 1 GB conv output never written)
# and a spread of `pool` variants for kb_96 and kb_08 (the conv in PyTorch, max-pool + mean in one pass), rendered by
# the offline proposer and judged on the GPU against eager and torch.compile (H100, fifth session: kb_96 4.546 ms,
# kb_08 2.477 ms device), at the correctness stage (pool_fused computes the conv) and memory-fusion (pool).
# Usage (GPU machine, repo root): bash bench/suite/window_families.sh     Results: $OUT/window_<problem>_<stage>.json, .txt
# Look for: every verdict correct; the device and latency ms; x compile (device) above 1 for pool_fused on kb_96.
set -u
export PYTHONPATH=${PYTHONPATH:-/opt/site}:$PWD NO_COLOR=1 COLUMNS=160
OUT=${OUT:-./window_out}; V=$OUT/window_variants; mkdir -p "$V"
python - "$V" <<'PY'
import sys
from pathlib import Path
from agent.catalog import find_gpu
from agent.offline import Variant, recognise, render
from agent.offline.planner import SPACE
from agent.problems import load_problem

out, gpu = Path(sys.argv[1]), find_gpu("h100")
for stem, family, variants in [
    ("kb_96_convt3d_mul_maxpool_gap_clamp", "pool_fused",
     [dict(block=b, warps=w, stages=1, split=1) for b in SPACE["pool_fused"]["block"] for w in SPACE["pool_fused"]["warps"]]),
    ("kb_96_convt3d_mul_maxpool_gap_clamp", "pool",
     [dict(block=b, warps=4, stages=1, split=s) for b in (512, 1024) for s in (1, 4)]),
    ("kb_08_conv3d_div_maxpool_gap_bias_sum", "pool",
     [dict(block=b, warps=w, stages=1, split=s) for b in (512, 1024) for w in (4, 8) for s in (1, 4)]),
]:
    plan = recognise(load_problem(stem))
    folder = out / f"{stem}_{family}"
    folder.mkdir(parents=True, exist_ok=True)
    for v in variants:
        variant = Variant(family=family, **v)
        name = f"{family}_b{v['block']}_w{v['warps']}_s{v['split']}.py"
        (folder / name).write_text(render(plan, variant, gpu))
print("rendered", sum(1 for _ in out.rglob("*.py")))
PY
for D in "$V"/*/; do
  D=${D%/}; NAME=$(basename "$D"); STEM=${NAME%_pool*}
  STAGE=memory-fusion; case $NAME in *_pool_fused) STAGE=correctness;; esac
  python -m agent eval "$D" --problem "$STEM" --stage "$STAGE" --json > "$OUT/window_$NAME.json" 2> "$OUT/window_$NAME.err"
  echo "$NAME rc=$?"
  python - "$OUT/window_$NAME.json" <<'PY' | tee "$OUT/window_$NAME.txt"
import json, sys
rows = json.load(open(sys.argv[1]))
rows = rows if isinstance(rows, list) else rows.get("results", [rows])
for r in rows:
    t = r.get("timing") or {}
    print(f"{str(r.get('file', '?')).split('/')[-1]:28s} {r.get('verdict'):14s} device {t.get('device_ms')} "
          f"latency {t.get('latency_ms')} x compile (device) {t.get('device_speedup_vs_compile')} "
          f"(latency) {t.get('latency_speedup_vs_compile')} | {str(r.get('message'))[:90]}")
PY
done

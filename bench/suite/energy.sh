# Issue 19 on a GPU: energy per call beside time, and a report of a real run. About 4 minutes on an H100.
#  1. the NVML counter as the worker opens it: its step and the idle power;
#  2. `agent eval --objective energy --json`: the seed's kernel once, the memory-fusion best twice (fresh processes:
#     the spread between them); eager and torch.compile come with them (their baselines, timed once and cached);
#  3. a short real run (--stage auto, the offline proposer, --objective energy) and its `agent report`.
# Outputs under $OUT: energy.md (the table for BENCHMARKS.md), energy.json, h100_run.html (the report), and
# energy.tar.gz (logs, leaderboard, the run's files and ncu reports).
# Usage (GPU machine, repo root): bash bench/suite/energy.sh [RUN_SECONDS]
set -u
export PYTHONPATH=/opt/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160 NO_COLOR=1
# plotly (the report) and nvidia-ml-py (NVML) are new dependencies: from the carried wheels where missing
python -c "import plotly, pynvml" 2>/dev/null || python -m pip install -q --no-index --find-links .whl plotly \
  nvidia-ml-py 2>&1 | tail -2
python -c "import plotly, pynvml; print('plotly', plotly.__version__, 'pynvml ok')" || echo "MISSING: plotly/pynvml"
OUT=${OUT:-$PWD/energy_out}; mkdir -p $OUT
R=/var/tmp/agent-energy; W=/var/tmp/agent-energy-out; rm -rf $R $W; mkdir -p $R/candidates/.cache $W
CACHE=$R/candidates/.cache  # the run's own cache: the evaluations' baselines are reused by the run
GPU=$(nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | head -1 | tee $W/gpu.txt)
echo "== 1. the energy counter"
python - $W/counter.json <<'PY'
import json, sys, time
from agent.harness.worker.energy import open_counter
import torch
torch.cuda.init()
c = open_counter(0)
if isinstance(c, str):
    out = {"note": c}
else:
    ticks = [c.tick() for _ in range(6)]  # five steps of the counter, the GPU idle
    if any(x is None for x in ticks):
        out = {"note": "the counter did not advance within a second"}
    else:
        steps = [(b[1] - a[1]) * 1000 for a, b in zip(ticks, ticks[1:])]
        (a, t0), (b, t1) = ticks[0], ticks[-1]
        out = {"period_ms": sorted(steps)[2], "steps_ms": steps, "idle_w": (b - a) / 1000 / (t1 - t0), "note": ""}
print(out)
json.dump(out, open(sys.argv[1], "w"))
PY
echo "== 2. energy per call: the seed's kernel, the memory-fusion best (twice)"
ev() {  # name file n
  python -m agent eval $2 --problem gap44 --stage memory-fusion --objective energy --json --cache-dir $CACHE \
    > $W/eval_$1_$3.json 2> $W/eval_$1_$3.err; echo "$1 #$3 rc=$?"
  python -c "import json,sys; e=json.load(open('$W/eval_$1_$3.json')); t=e.get('timing') or {}; print('  ', e['verdict'], {k: t.get(k) for k in ('device_ms','latency_ms','energy_mj','energy_spread_pct','power_w','eager_energy_mj','compile_energy_mj','energy_note')})" 2>&1 | tail -1
}
ev seed agent/problems/gap44_start.py 1
ev memory_fusion_best bench/candidates/gap44_offline_memory_fusion.py 1
ev memory_fusion_best bench/candidates/gap44_offline_memory_fusion.py 2
python - $W "$GPU" > $OUT/energy.json <<'PY'
import glob, json, os, sys
w, gpu = sys.argv[1], sys.argv[2]
evals = {}
for key in ("seed", "memory_fusion_best"):
    evals[key] = []
    for f in sorted(glob.glob(f"{w}/eval_{key}_*.json")):
        try:
            evals[key].append(json.load(open(f)))
        except ValueError as e:
            evals[key].append({"verdict": "unreadable", "message": str(e)})
counter = json.load(open(f"{w}/counter.json")) if os.path.exists(f"{w}/counter.json") else {}
print(json.dumps({"gpu": gpu, "counter": counter, "evals": evals}))
PY
python bench/suite/energy_tables.py $OUT/energy.json | tee $OUT/energy.md
echo "== 3. a short real run (--objective energy) and its report"
timeout ${1:-150} python -m agent run --stage auto --llm offline --iterations 2 --samples 2 --patience 1 \
  --objective energy --root $R --device cuda > $W/run.txt 2>&1; echo "run rc=$?"; tail -22 $W/run.txt
RUN=$(python -m agent runs --json --root $R | python -c "import json,sys; print(json.load(sys.stdin)[0]['id'])")
python -m agent leaderboard --run $RUN --all --root $R > $W/leaderboard.txt 2>&1; head -12 $W/leaderboard.txt
python -m agent leaderboard --run $RUN --json --root $R > $W/leaderboard.json 2>&1
python -m agent report $RUN --root $R -o $OUT/h100_run.html; echo "report rc=$?"
cp -r $R/candidates/$RUN $W/run_files; cp -r $R/profiles $W/profiles 2>/dev/null
tar czf $OUT/energy.tar.gz -C $W . && ls -la $OUT
cat <<'TXT'
== what to check
- energy.md: eager, torch.compile, the seed's kernel and the memory-fusion best each have an energy per call (mJ),
  never "–"; the spread over blocks a few % at most; the memory-fusion best's two processes agree within a few %.
  Sanity: energy per call ~ mean power x the call's time back to back (device ms for GPU-bound calls); the mean
  power between idle (printed in 1.) and the board's power limit (gpu.txt).
- The counter's step (1.) is tens of ms at most; blocks are sized to 10 steps or 200 ms, whichever is longer.
- The run: `agent run ... --objective energy` finished (rc 0), its leaderboard has an energy column with figures, its
  summary names the best in "mJ per call".
- h100_run.html opens offline (here: chromium file://...), every chart drawn, energy chart present. For README:
  bash bench/diag/report_screenshot.sh h100_run.html docs/report-h100-run.png (on the CPU machine, Chromium installed).
TXT

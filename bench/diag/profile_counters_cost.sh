# Issue 17 on a GPU: what the stage set's profile now carries (diagnosis counters, SourceCounters) and what it costs.
#   bash bench/diag/profile_counters_cost.sh   (writes under $OUT)
export PYTHONPATH=/opt/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160 NO_COLOR=1
R=/opt/d17s-$(date +%s); mkdir -p $R
python -m agent run --llm offline --iterations 1 --samples 4 --root $R --quiet 2>&1 | tail -3
RUN=$(python -m agent runs --root $R --json | python -c "import json,sys; print(json.load(sys.stdin)[0]['id'])")
echo "== profile wall times (s), stage set + diagnosis metrics + SourceCounters"
for j in $R/profiles/$RUN/*.json; do python -c "import json,sys; d=json.load(open('$j')); print('$j'.split('/')[-1], d['wall_s'])"; done
for f in $R/profiles/$RUN/*.ncu-rep; do echo "== $f"; python -m agent ncu $f --format diagnosis | grep -E '^│ [a-z]' | cut -c1-150; cp $f $OUT/; done
BEST=$(python -m agent runs --root $R --json | python -c "import json,sys; print(json.load(sys.stdin)[0]['best'])")
echo "== show --sass $BEST"; python -m agent show $BEST --sass --root $R | head -16
python -m agent export ${RUN}-i0-c0 -o /opt/seed_k.py --root $R
for s in stage full; do /usr/bin/time -f "$s set: %e s" python -m agent profile /opt/seed_k.py --problem gap44 --stage memory-fusion --set $s -o $OUT/seed_$s.ncu-rep 2>&1 | tail -2; done
ls -la $OUT

export PYTHONPATH=/opt/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160 NO_COLOR=1
R=/opt/d17; mkdir -p $R
python -m agent run --llm offline --iterations 2 --samples 4 --root $R --quiet 2>&1 | tail -15
RUN=$(python -m agent runs --root $R --json | python -c "import json,sys; print(json.load(sys.stdin)[0]['id'])")
echo "== prompts"; python -m agent prompts $RUN --root $R | tail -8
python -m agent prompts $RUN --root $R --format prompt > $OUT/prompts.txt
for f in $(ls $R/profiles/$RUN/*.ncu-rep 2>/dev/null || find $R/profiles -name '*.ncu-rep'); do echo "== $f"; python -m agent ncu $f --format diagnosis; cp $f $OUT/; done
python -m agent leaderboard --root $R --json > $OUT/leaderboard.json

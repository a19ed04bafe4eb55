-- The queryable index over candidates/ (the files are the truth; `Store.reindex()` rebuilds all of this).

CREATE TABLE runs (
    id          TEXT PRIMARY KEY,
    problem     TEXT NOT NULL,
    stage       TEXT NOT NULL,          -- as requested: a stage name or 'auto'
    gpu         TEXT NOT NULL,
    device      TEXT NOT NULL,
    llm         TEXT NOT NULL,
    model       TEXT NOT NULL,
    status      TEXT NOT NULL,          -- running | finished | failed | interrupted
    started_at  TEXT NOT NULL,          -- ISO 8601, UTC
    finished_at TEXT,
    best        TEXT,                   -- candidate id of the current best
    pid         INTEGER,                -- of the process running it, to tell 'running' from 'interrupted'
    host        TEXT,
    config      TEXT NOT NULL           -- RunConfig as JSON
);

-- One row per attempt at an iteration: a resumed run redoes its incomplete iteration as attempt 2.
CREATE TABLE iterations (
    run_id      TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    iteration   INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    stage       TEXT NOT NULL,
    prompt      TEXT NOT NULL,
    reason      TEXT NOT NULL,          -- why this stage (for --stage auto and `agent replay`)
    best_before TEXT,
    started_at  TEXT NOT NULL,
    completed   INTEGER NOT NULL DEFAULT 0,  -- 1 once end_iteration() said so
    PRIMARY KEY (run_id, iteration, attempt)
);

CREATE TABLE candidates (
    id                 TEXT PRIMARY KEY,
    run_id             TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    iteration          INTEGER NOT NULL,
    attempt            INTEGER NOT NULL,
    idx                INTEGER NOT NULL,
    dir                TEXT NOT NULL,   -- relative to candidates/
    stage              TEXT NOT NULL,
    verdict            TEXT NOT NULL,
    message            TEXT NOT NULL,
    candidate_ms       REAL,
    spread_pct         REAL,
    eager_ms           REAL,
    compile_ms         REAL,
    speedup_vs_eager   REAL,
    speedup_vs_compile REAL,
    meaningful         INTEGER,         -- 0 for CPU-mode timings
    device             TEXT,
    model              TEXT,
    prompt_tokens      INTEGER NOT NULL DEFAULT 0,
    completion_tokens  INTEGER NOT NULL DEFAULT 0,
    cost_usd           REAL NOT NULL DEFAULT 0,
    dram_pct           REAL,            -- longest kernel's DRAM throughput, % of peak (when profiled)
    bottleneck         TEXT,
    created_at         TEXT NOT NULL
);
CREATE INDEX candidates_run ON candidates(run_id, iteration, attempt, idx);
CREATE INDEX candidates_rank ON candidates(verdict, speedup_vs_eager);

CREATE TABLE metrics (
    candidate_id TEXT NOT NULL REFERENCES candidates(id) ON DELETE CASCADE,
    kernel       TEXT NOT NULL,
    metric       TEXT NOT NULL,
    value        REAL NOT NULL,
    PRIMARY KEY (candidate_id, kernel, metric)
);

-- Every LLM HTTP exchange, as sent and as received (simonw/llm's habit: the log is the replay story).
CREATE TABLE calls (
    run_id            TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq               INTEGER NOT NULL,
    iteration         INTEGER NOT NULL,
    request           TEXT NOT NULL,    -- JSON
    response_raw      TEXT NOT NULL,
    prompt_tokens     INTEGER,
    completion_tokens INTEGER,
    cost_usd          REAL,
    created_at        TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);

-- Spend per run: what the calls cost where calls with usage were logged, else what the answers say they cost.
CREATE VIEW usage AS
SELECT r.id AS run_id,
       (SELECT COUNT(*) FROM calls c WHERE c.run_id = r.id) AS calls,
       CASE WHEN EXISTS (SELECT 1 FROM calls c WHERE c.run_id = r.id AND c.prompt_tokens IS NOT NULL)
            THEN (SELECT COALESCE(SUM(prompt_tokens), 0) FROM calls c WHERE c.run_id = r.id)
            ELSE (SELECT COALESCE(SUM(prompt_tokens), 0) FROM candidates k WHERE k.run_id = r.id) END AS prompt_tokens,
       CASE WHEN EXISTS (SELECT 1 FROM calls c WHERE c.run_id = r.id AND c.prompt_tokens IS NOT NULL)
            THEN (SELECT COALESCE(SUM(completion_tokens), 0) FROM calls c WHERE c.run_id = r.id)
            ELSE (SELECT COALESCE(SUM(completion_tokens), 0) FROM candidates k WHERE k.run_id = r.id) END AS completion_tokens,
       CASE WHEN EXISTS (SELECT 1 FROM calls c WHERE c.run_id = r.id AND c.prompt_tokens IS NOT NULL)
            THEN (SELECT COALESCE(SUM(cost_usd), 0) FROM calls c WHERE c.run_id = r.id)
            ELSE (SELECT COALESCE(SUM(cost_usd), 0) FROM candidates k WHERE k.run_id = r.id) END AS cost_usd
FROM runs r;

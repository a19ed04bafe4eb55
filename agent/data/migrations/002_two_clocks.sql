-- Two clocks (issue 15): every candidate's device time and call latency, launches per forward and host time, and the
-- speedups on each clock. candidate_ms and the plain speedups follow the run's objective (`objective`).
ALTER TABLE candidates ADD COLUMN objective TEXT;
ALTER TABLE candidates ADD COLUMN device_ms REAL;
ALTER TABLE candidates ADD COLUMN latency_ms REAL;
ALTER TABLE candidates ADD COLUMN host_ms REAL;
ALTER TABLE candidates ADD COLUMN launches INTEGER;
ALTER TABLE candidates ADD COLUMN device_speedup_vs_eager REAL;
ALTER TABLE candidates ADD COLUMN latency_speedup_vs_eager REAL;
ALTER TABLE candidates ADD COLUMN device_speedup_vs_compile REAL;
ALTER TABLE candidates ADD COLUMN latency_speedup_vs_compile REAL;
-- Rows indexed before: their one clock was the device clock (their files say the same: schema.Timing reads them so).
UPDATE candidates SET objective = 'device', device_ms = candidate_ms, device_speedup_vs_eager = speedup_vs_eager,
    device_speedup_vs_compile = speedup_vs_compile WHERE candidate_ms IS NOT NULL;

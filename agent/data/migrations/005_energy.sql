-- Energy beside time (issue 19): the GPU's energy per call in mJ (NVML's counter around calls queued back to back),
-- or why it was not measured (CPU mode, no NVML, a GPU without the counter). Rows indexed before say so.
ALTER TABLE candidates ADD COLUMN energy_mj REAL;
ALTER TABLE candidates ADD COLUMN energy_note TEXT;
UPDATE candidates SET energy_note = 'recorded before energy was measured' WHERE candidate_ms IS NOT NULL;

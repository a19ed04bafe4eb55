-- Why a run stopped (issue 33): the signal that interrupted it, or the error it failed on, one line. Runs recorded
-- before have none; the report then says what it can tell from the status alone.
ALTER TABLE runs ADD COLUMN stop_reason TEXT;

-- Search beyond greedy (issue 18): each candidate's parent (the candidate whose code its prompt showed), its idea in a
-- few words and the finding its prompt asked it to address; each iteration's groups (parent, stage, samples, prompt)
-- as JSON, so an interrupted round is redone from the same parents. Rows indexed before: no parent was recorded, and
-- their one group is the iteration's own prompt and best_before (agent.store reads them so).
ALTER TABLE candidates ADD COLUMN parent TEXT;
ALTER TABLE candidates ADD COLUMN idea TEXT NOT NULL DEFAULT '';
ALTER TABLE candidates ADD COLUMN finding TEXT;
ALTER TABLE iterations ADD COLUMN groups TEXT NOT NULL DEFAULT '[]';

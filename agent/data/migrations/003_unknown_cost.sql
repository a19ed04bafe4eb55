-- An unknown cost (issue 20): a candidate whose model has no known price is marked priced = 0 (its cost_usd, NOT NULL,
-- stays 0 and means nothing), and a run counts such candidates as `unpriced` (its cost is then shown as unknown, or
-- as a lower bound). Rows indexed before were all priced, as far as anyone knew.
ALTER TABLE candidates ADD COLUMN priced INTEGER NOT NULL DEFAULT 1;
DROP VIEW IF EXISTS usage;
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
            ELSE (SELECT COALESCE(SUM(cost_usd), 0) FROM candidates k WHERE k.run_id = r.id) END AS cost_usd,
       (SELECT COUNT(*) FROM candidates k WHERE k.run_id = r.id AND k.priced = 0
            AND COALESCE(k.prompt_tokens, 0) + COALESCE(k.completion_tokens, 0) > 0) AS unpriced
FROM runs r;

-- 060: each replay says the pre-scaling rule it replayed (lead, quantile, scale-in wait, refresh,
-- calibration window), so a replay by hand with another --lead or config is told apart from the
-- run's on the page. NULL on replays stored before this migration.
ALTER TABLE replays ADD COLUMN IF NOT EXISTS rule VARCHAR;

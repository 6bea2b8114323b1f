-- 030: the --cluster/--pool a batch was loaded with, for formats whose rows take them
-- (prometheus-json utilization, gwa-t12): a re-ingest with other ones is said, not silent.
ALTER TABLE ingest_batches ADD COLUMN IF NOT EXISTS labels VARCHAR;

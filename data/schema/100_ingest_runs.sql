-- 100: the ingest run (one command or flow run) each batch came in with, so status counts the
-- files of the last ingest rather than the batches a minute apart. NULL for older batches.
ALTER TABLE ingest_batches ADD COLUMN IF NOT EXISTS run_id VARCHAR;

-- 080: each batch's file size and modification time, so the hourly ingest of a drop folder
-- knows a file it loaded already without reading (hashing) it again.
ALTER TABLE ingest_batches ADD COLUMN IF NOT EXISTS file_size BIGINT;
ALTER TABLE ingest_batches ADD COLUMN IF NOT EXISTS file_mtime_ns BIGINT;

-- 020: extra labels per alert (JSON object) for the sinks, and when a detector state was saved.
ALTER TABLE alerts ADD COLUMN IF NOT EXISTS labels VARCHAR;
ALTER TABLE detector_state ADD COLUMN IF NOT EXISTS updated_at TIMESTAMP;

-- 000: the migration ledger. Applied before every migration check; idempotent.
CREATE TABLE IF NOT EXISTS schema_version (
    version    INTEGER PRIMARY KEY,
    name       VARCHAR   NOT NULL,
    applied_at TIMESTAMP NOT NULL
);

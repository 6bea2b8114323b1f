-- 070: 040's columns again, for the warehouses whose ledger holds 040 under another name.
-- Main carried a 040_sink_targets for six minutes on 2026-12-01 before 040_delivery_claims
-- took the number; a warehouse migrated then records 040 and never got these columns, so
-- every detect failed. Idempotent: a warehouse that has them keeps them as they are.
ALTER TABLE alert_deliveries ADD COLUMN IF NOT EXISTS claimed_by VARCHAR;
ALTER TABLE alert_deliveries ADD COLUMN IF NOT EXISTS claimed_until TIMESTAMP;
ALTER TABLE alert_deliveries ADD COLUMN IF NOT EXISTS severity VARCHAR;
ALTER TABLE alert_deliveries ADD COLUMN IF NOT EXISTS probability DOUBLE;
ALTER TABLE alert_deliveries ADD COLUMN IF NOT EXISTS summary VARCHAR;

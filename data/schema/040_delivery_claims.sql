-- 040: alert deliveries are claimed while they are sent, and say what their transition said.
-- claimed_by / claimed_until: the run sending a pending delivery and when its claim lapses (wall
-- clock; a run that died leaves it pending again then), so two detect runs at once do not both
-- send it. severity / probability / summary: the alert's as the transition was recorded, so one
-- sent late (the sink was down) says what happened then, not what the alert says now. NULL on
-- rows recorded before this migration: those are built from the alert's row, as they were.
ALTER TABLE alert_deliveries ADD COLUMN IF NOT EXISTS claimed_by VARCHAR;
ALTER TABLE alert_deliveries ADD COLUMN IF NOT EXISTS claimed_until TIMESTAMP;
ALTER TABLE alert_deliveries ADD COLUMN IF NOT EXISTS severity VARCHAR;
ALTER TABLE alert_deliveries ADD COLUMN IF NOT EXISTS probability DOUBLE;
ALTER TABLE alert_deliveries ADD COLUMN IF NOT EXISTS summary VARCHAR;

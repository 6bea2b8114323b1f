-- 040: alert sinks are named for their target (jsonl:<path>, webhook:<url>,
-- alertmanager:<url>), no longer for their kind. Deliveries still pending under a bare kind
-- would wait for a sink that no longer exists; they go. The renamed sink is new to every
-- alert, so it hears each one still firing on the next detect run.
DELETE FROM alert_deliveries WHERE sink IN ('jsonl', 'webhook', 'alertmanager') AND state = 'pending';

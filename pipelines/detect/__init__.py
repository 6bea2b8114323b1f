"""Detect: burst, fault and price-spike detection over the warehouse, and alerts.

Owns the detection steps (``steps``), the alert lifecycle and deliveries (``alerts``) and the
sinks they go to: JSONL, webhook, Alertmanager (``sinks``).
"""

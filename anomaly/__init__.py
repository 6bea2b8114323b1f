"""headroom anomaly: pure detection core (no I/O)."""

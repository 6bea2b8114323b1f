"""headroom forecasters: pure forecasting core (no I/O)."""

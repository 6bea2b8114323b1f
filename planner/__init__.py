"""headroom planner: pure capacity-planning core (no I/O)."""

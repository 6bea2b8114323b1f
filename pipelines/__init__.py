"""headroom pipelines: the I/O shell (adapters, warehouse, Prefect flows, CLI)."""

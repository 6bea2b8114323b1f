"""headroom pipelines: the I/O shell, in wings (ingest, store, detect, plan, report, synth,
runtime), the Prefect flows and the ``headroom`` CLI."""

"""Prefect flows: thin wrappers, each task one library call."""

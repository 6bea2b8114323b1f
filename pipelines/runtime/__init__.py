"""Runtime: what every command shares at run time.

Owns the settings (``settings``), the local Prefect server for ``serve`` (``prefect_server``),
headroom's log lines in deployed runs' Prefect logs (``run_logs``), atomic output writing
(``outputs``), money formatting (``money``) and input text made safe to show (``text``).
"""

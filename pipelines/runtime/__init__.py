"""Runtime: what every command shares at run time.

Owns the settings (``settings``), the local Prefect server for ``serve`` (``prefect_server``),
atomic output writing (``outputs``) and money formatting (``money``).
"""

"""Ingest: input files into the warehouse.

Owns the input contract (``contract``), one format registry (``registry``) and an adapter per
format, CSV read line by line (``csv_lines``), SQL validation (``validate``), the
one-transaction load (``loading``), the conversion of public traces into the contract
(``convert``) and the reading of the evaluation commands' files (``tables``).
"""

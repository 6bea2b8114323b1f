"""Store: the DuckDB warehouse and every read and write of it.

Owns the connection, locking and migrations (``warehouse``), the demand query (``demand``), the
forecasting models, runs and forecast reads (``models``) and detection's inputs and state
(``detection``). Other wings reach the warehouse through here.
"""

"""Plan: the planner's inputs from the warehouse and its recommendations back into it.

Owns the plan run's reads and writes (``planning``) and the TOML policy file (``config``).
"""

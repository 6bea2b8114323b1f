"""Synth: the seeded synthetic fleet the demo and the tests run on.

``fleet.generate_fleet`` builds every input kind as DataFrames from ``config``'s shape, with
``demand``, ``devices`` and ``market``; ``files.write_fleet`` writes them as CSV.
"""

"""Evaluate a team on test cases (``teamrun eval``) and run it over many inputs (``teamrun batch``).

Both drive the public engine API (:class:`teamrun.Team`), one run per case or row,
concurrently on the local asyncio loop, or on Ray workers (:mod:`teamrun.evals.engines`).
"""

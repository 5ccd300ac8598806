"""The chaos harness (``make chaos``): Bindery's invariants under churn, kills and outages.

Not part of ``make test``: a run takes about a minute. See chaos/cli.py for the flags and
chaos/README.md for recorded results.
"""

"""Scenarios: what an experiment does (config), and running it end to end (runner)."""

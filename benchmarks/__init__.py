"""Benchmarks and the papers' reproduction (`python -m benchmarks.reproduce`); scripts run as files too."""

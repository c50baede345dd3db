"""Fairness transforms applied to synthetic tables as post-processing (TOT)."""

"""Prefect flows of privfair (repository-level, not shipped in the wheel)."""

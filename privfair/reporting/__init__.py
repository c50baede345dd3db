"""Self-contained HTML reports of releases."""

"""The synthetic-table pipeline the table and gan kinds share: parameters and plan, reading
and post-noise stages, manifest, publication (not a kind; it imports no kind)."""

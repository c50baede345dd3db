"""Embedding releases: edge-level DP node embeddings (DPNE) of a declared graph (privfair embed)."""

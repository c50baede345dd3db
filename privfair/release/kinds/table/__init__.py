"""The table kind: a DP synthetic table from noisy marginals (MST, PreFair, AIM, independent)."""

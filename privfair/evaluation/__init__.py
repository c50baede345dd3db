"""Evaluation against real data (NOT privacy-protected): utility, fairness, classifiers,
grids of (method, ε, seed)."""

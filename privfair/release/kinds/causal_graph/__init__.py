"""Graph releases: DP causal discovery published as a graph (privfair discover)."""

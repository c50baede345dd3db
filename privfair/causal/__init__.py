"""DP causal discovery (PrivPC and its baselines go here)."""

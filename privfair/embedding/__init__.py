"""DP graph learning: DPNE node embeddings (Xu 2021, ch. 5) with a repaired privacy argument."""

"""DP domains learnt from the private data: CatHist category lists and DP quantile bins."""

"""Model releases: DP classifiers trained, published and scored (privfair train / predict)."""

"""DP and fair classifiers released as models (PFLR, DP-SGD and DPSGD-F go here)."""

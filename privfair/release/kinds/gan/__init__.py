"""The gan kind: a DP synthetic table from a GAN trained with DP-SGD."""

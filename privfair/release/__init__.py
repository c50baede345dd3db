"""Releases: seeds, preflight checks and ingest, then table, GAN, model and graph kinds."""

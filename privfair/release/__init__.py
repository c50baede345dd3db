"""Releases: the protocol, the shared check and manifest, the registry, and one package per
kind under ``kinds/`` (table, gan, model, causal_graph, embedding)."""

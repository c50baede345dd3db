"""Data contracts: schema, encoding, TOT settings, features, datasets, validation, tools."""

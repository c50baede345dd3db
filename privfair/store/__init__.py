"""The release store: privacy registry, artefacts, publication protocol, check and gc."""

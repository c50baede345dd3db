"""Table releases: plan, private and post-noise stages, manifest, publish, runner."""

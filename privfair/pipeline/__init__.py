"""The release pipeline, library side: contracts, ingestion, DP domains, the stages,
manifest, publication into the release store, and the report. Never imports Prefect."""

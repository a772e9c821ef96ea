"""The Dagster face of indexing: assets, checks, the sensor, their definitions (without stores: the
query server composes the code location, ``query_server.dagster_location``) and the in-process run."""

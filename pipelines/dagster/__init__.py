"""The Dagster face of indexing: assets, checks, the sensor, the code location and the in-process run."""

"""The indexing pipeline: plain functions, wrapped by Dagster assets and the CLI."""

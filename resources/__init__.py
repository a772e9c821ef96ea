"""Shared resources of codemem: settings, schemas, embedders and stores."""

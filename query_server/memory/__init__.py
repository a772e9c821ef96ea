"""The memory tools: add, search, update, delete, export/import, normalization, backup."""

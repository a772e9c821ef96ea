"""The memory ledger (system of record) and what is built from it: projections, scopes, normalization, exports."""

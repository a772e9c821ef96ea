"""codemem benchmarks: retrieval quality and indexing throughput (see docs/benchmarks.md)."""

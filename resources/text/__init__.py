"""Text handling shared by indexing, search and the design checks: the identifier tokenizer."""

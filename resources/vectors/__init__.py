"""The vector store (qdrant-edge embedded, Qdrant server) and the sparse (BM25-style) vectors."""

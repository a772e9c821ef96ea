"""The design layer's derivation: documents read into memories, links, patterns and components."""

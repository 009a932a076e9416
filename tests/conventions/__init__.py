"""Repository conventions: lint, layers, purity, docs, packaging, notebooks, README."""

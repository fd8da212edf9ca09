"""Data sources: folders, manifests, WebDataset shards, archives, precomputed embeddings."""

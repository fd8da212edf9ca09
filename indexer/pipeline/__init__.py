"""Indexing pipeline: reader -> features/embeddings -> DB rows + vectors."""

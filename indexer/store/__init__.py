"""FAISS stores: float (inner product) and binary (Hamming) indexes with sidecars."""

"""Per-image features from one decode: exact digests, perceptual hashes, text fields."""

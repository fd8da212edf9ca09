"""Label-leak detection: label-name normalisation and multi-pattern matching."""

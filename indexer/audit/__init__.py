"""Audit engine: split vs corpora -> exact / near / semantic / label_leak matches."""

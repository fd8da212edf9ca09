"""Reviewer verdicts on audit matches: listing, filtering and recording reviews."""

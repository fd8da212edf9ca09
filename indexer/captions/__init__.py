"""Caption contamination: test captions that are exact or near copies of a corpus's captions.

Beside ``labels`` in the low layers (imports ``db``, ``errors``, ``kinds`` and the value type
``match.found.FoundMatch`` only):

- :mod:`~splitaudit.indexer.captions.normalize`: NFKC, casefold, punctuation out, boilerplate
  phrases cut, word tokens and stable word-bigram shingle hashes;
- :mod:`~splitaudit.indexer.captions.minhash`: vectorised MinHash signatures, LSH band keys,
  the longest shared word run;
- :mod:`~splitaudit.indexer.captions.boilerplate`: corpus shingle frequencies and the rules that
  keep boilerplate from matching on its own;
- :mod:`~splitaudit.indexer.captions.index`: the persistent, segmented caption index of a corpus;
- :mod:`~splitaudit.indexer.captions.sync`: ``sync_caption_index`` (incremental, resumable) and
  ``open_caption_index`` over the workspace DB;
- :mod:`~splitaudit.indexer.captions.query`: ``find_caption_matches`` -> ``CaptionHit``;
- :mod:`~splitaudit.indexer.captions.tier`: ``caption_matches`` -> ``FoundMatch`` rows of kind
  ``caption`` for an audit.

docs/captions.md says what matches, how the thresholds were measured and what it costs.
"""

"""Label-leak detection: label-name normalisation and multi-pattern matching.

- :mod:`~splitaudit.indexer.labels.normalize`: the tokenizer (NFKC, casefold, word/camelCase/digit
  splits, simple plurals, spans in the original text) and the default stop-list;
- :mod:`~splitaudit.indexer.labels.names`: label names files and the terms matched per label;
- :mod:`~splitaudit.indexer.labels.matcher`: ``LabelMatcher``, one Aho-Corasick automaton per audit;
- :mod:`~splitaudit.indexer.labels.leak`: self-leak, match-leak and prevalence checks with evidence.
"""

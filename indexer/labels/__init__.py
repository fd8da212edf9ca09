"""Label-leak detection: label-name normalisation and multi-pattern matching.

- :mod:`~indexer.labels.normalize`: the tokenizer (NFKC, casefold, word/camelCase/digit
  splits, simple plurals, spans in the original text) and the default stop-list;
- :mod:`~indexer.labels.names`: label names files and the terms matched per label;
- :mod:`~indexer.labels.matcher`: ``LabelMatcher``, one Aho-Corasick automaton per audit;
- :mod:`~indexer.labels.leak`: self-leak, match-leak and prevalence checks with evidence.
"""

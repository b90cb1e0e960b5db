"""BM25 (Lucene's scoring) with the analyzers that match Lucene's English tokens and
Porter stems."""

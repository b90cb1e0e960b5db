"""Models behind three roles (listwise reranker, pointwise yes/no scorer, text generator), their prompts and
output parsers, a persistent response cache, and the per-query ledger of what each query cost."""

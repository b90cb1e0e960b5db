"""Models behind three roles (listwise reranker, pointwise yes/no scorer, text generator) and the encoders that
embed documents and queries, their prompts and output parsers, a persistent response cache, and the per-query
ledger of what each query cost. The index builds on these models (summaries, embeddings); nothing here imports
the index package: a role that needs an index's vectors is handed the index folder."""

"""Pair scorers trained on mined (query, text, label) pairs: GAREN's navigator (query, group summary) and the
pointwise reranker (query, document).

- ``causal_lm.YesNoLoRAScorer``: a causal LM's P(yes) with LoRA (Qwen3-Reranker-4B on GPUs, SmolLM2 on CPU);
- ``cross_encoder.CrossEncoderScorer``: a one-logit head on an encoder (all-MiniLM-L6-v2 on CPU);
- ``bi_encoder.BiEncoderScorer``: a sentence-embedding model's cosine, every weight trained (the CPU navigator);
- ``base``: the loss, optimiser, validation metrics and checkpoint contents they share; ``losses``, ``metrics``;
- ``export_folder``: the manifest every export writes.

Data: ``garen_train.pairs_data.MinedPairsDataModule``. Configs: ``configs/train/*.yaml``.
"""

"""Corpora, queries and relevance judgements, loaded and validated from BEIR folders, BRIGHT, plain JSONL or
ir_datasets."""

from garen_infer.data.dataset import Dataset, Document, Query
from garen_infer.data.spec import load_dataset, load_judgments

__all__ = ["Dataset", "Document", "Query", "load_dataset", "load_judgments"]

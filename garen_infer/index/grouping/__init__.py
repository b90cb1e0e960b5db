"""GAREN's groups: the partitions (Leiden, k-means, random), their summaries and the
groups file format."""

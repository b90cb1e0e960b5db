"""Soft (overlapping) graph partitions for GAREN, learned with torch-geometric (the second garen-train job).

    garen-train fit --config configs/train/partition-dmon.yaml      learn (graph.py, data.py, model.py, objective.py)
    garen-train export --checkpoint CKPT --index DIR --dataset SPEC write a groups_soft stage (export.py)
    garen-train partition-report --index DIR --stage ...            partition quality and App. C.3 counts (report.py)

The job reads an index folder's files (embeddings.npy, knn_graph/, a groups stage) and writes a groups stage back
into it; garen_infer never imports this package.
"""

"""garen_train: Lightning jobs for the improvements GAREN proposes (navigator LoRA, soft partitions), and export.

Depends on garen_infer, never the other way round; what crosses between them is files on disk.
"""

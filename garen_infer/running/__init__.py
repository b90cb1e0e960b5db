"""Running a method over queries: the scheduler that batches every query's model requests, the
runner (resume, outputs), shards, merging shards and repeated seeds."""

"""Evaluation of a run: ir-measures metrics, reachability by hop distance and the cost of a
query in dollars."""

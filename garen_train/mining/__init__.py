"""Training pairs mined from GAREN's own traversal (``garen-train mine``).

- ``pairs.py``: the labelling rules: navigator groups (scored, or gold but never reached) and reranker documents
  (judged, hard negatives from the first stage);
- ``guard.py``: evaluation queries never enter a training file (by query id and by query text);
- ``replay.py``: GAREN replayed through garen_infer's runner, with the navigator's answers kept;
- ``synthetic.py``: queries written from a corpus with no judgments (``garen-train mine-synthetic``);
- ``folder.py``: the mined-pairs folder, the contract the training DataModules read.
"""

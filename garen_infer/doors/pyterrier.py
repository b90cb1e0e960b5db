"""PyTerrier transformers over the Python API (``pip install 'garen[pyterrier]'``; no Java needed).

Each method is a ``pt.Transformer`` with two modes, chosen by the input frame as PyTerrier's own stages are:
- retriever-style, from a query frame (``qid, query``): the method starts from the index's configured first stage,
  exactly as ``garen-infer run`` does;
- reranking-style, from a result frame (``qid, query, docno`` and ``rank`` or ``score``, like pyterrier_adaptive's
  GAR): the method starts from that ranking instead, so ``BM25(index) >> GAREN(index, budget=100)`` or any other
  first stage whose docnos are the index's documents works.

    import pyterrier as pt
    from garen_infer.doors.pyterrier import BM25, GAREN, SlideGAR
    bm25 = BM25(index)
    pt.Experiment([bm25, bm25 >> SlideGAR(index), bm25 >> GAREN(index)], index.topics(), index.qrels(), ["nDCG@10"])

The output is a result frame (``qid, query, docno, score, rank``; rank from 0, scores strictly decreasing) with
the ranking the method returns and ``run.trec``'s scores: the method's own where it has them (BM25's for
``BM25`` from a query frame, a result frame's own for ``BM25`` fed one, a pointwise reranker's P(yes) or the
embedding reranker's cosine for the methods that rerank), ``n - rank`` for a listwise order (docs/running.md,
"Scores in run.trec"). Fuse them by rank across kinds. The retriever's ``ledger`` holds what each query of the
last call cost.
"""

from __future__ import annotations

try:
    import pyterrier as pt
except ImportError as err:  # an extra: say how to get it rather than fail on a bare name
    raise ImportError("garen_infer.doors.pyterrier needs PyTerrier: pip install 'garen[pyterrier]'") from err

from garen_infer.configuration.presets import DEFAULT_PRESET
from garen_infer.doors.api import RESULT_COLUMNS, Retriever

OUTPUT_COLUMNS = ["qid", "query", "docno", "score", "rank"]


class Method(pt.Transformer):
    """A method of this toolkit (``method``: a name ``garen-infer run --method`` takes) as a PyTerrier transformer.
    The keyword arguments are ``garen_infer.Retriever``'s."""

    method: str = ""

    def __init__(self, index, method: str | None = None, *, budget: int | None = None, preset: str = DEFAULT_PRESET,
                 overrides=None, cache=None, max_active_queries: int | None = None):
        self.retriever = Retriever(index, method or self.method, budget=budget, preset=preset, overrides=overrides,
                                   cache=cache, max_active_queries=max_active_queries)

    @property
    def ledger(self):
        return self.retriever.ledger

    def transform(self, inp):
        import pandas as pd

        with pt.validate.any(inp) as frame:
            frame.result_frame(extra_columns=["query"], mode="rerank")
            frame.query_frame(extra_columns=["query"], mode="retrieve")
        if len(inp) == 0:
            return pd.DataFrame(columns=OUTPUT_COLUMNS)
        if frame.mode == "rerank":
            ranked = self.retriever.rerank(inp)
            queries = inp[["qid", "query"]].astype({"qid": str}).drop_duplicates("qid")
        else:
            ranked = self.retriever.search(inp)
            queries = inp.astype({"qid": str})  # a retriever keeps its input's query columns, as PyTerrier's do
        out = queries.merge(ranked[RESULT_COLUMNS], on="qid", how="inner", sort=False)
        return out[[*queries.columns, "docno", "score", "rank"]]

    def transform_outputs(self, input_columns: list[str]) -> list[str]:
        pt.validate.columns(input_columns, includes=["qid", "query"])
        return OUTPUT_COLUMNS if "docno" in input_columns else [*input_columns, "docno", "score", "rank"]

    def __repr__(self) -> str:
        config = self.retriever.config
        return (
            f"{type(self).__name__}({config.method!r}, budget={config.budget!r}, "
            f"index={str(self.retriever.index.path)!r})"
        )


class BM25(Method):
    """The index's BM25 (bm25s or Lucene's reading, as the preset builds it): a first stage without Java."""

    method = "bm25"


class Rerank(Method):
    """Sliding-window listwise reranking of the first stage's top ``budget`` (RankGPT-style)."""

    method = "rerank"


class SlideGAR(Method):
    """SlideGAR: adaptive reranking over the corpus k-NN graph with a listwise reranker."""

    method = "slidegar"


class GAREN(Method):
    """GAREN: group-aware adaptive retrieval (groups, navigator, evidence propagation)."""

    method = "garen"


class RGS(Method):
    """Reranker-guided search over the proximity graph."""

    method = "rgs"


class LATTICE(Method):
    """LATTICE: LLM-guided search of the semantic tree."""

    method = "lattice"

"""GAREN's expansion order past the first-stage depth and the document-level cap."""

from __future__ import annotations

import numpy as np
from test_garen import MEMBERS, HandBuiltIndex, drive, make_garen, ring_neighbours, world_state

from garen_infer.data.dataset import Query
from garen_infer.llm.requests import ScoreYesNo
from garen_infer.methods.base import QueryState


class ScoredBm25:
    """A first stage whose score of every document is given."""

    def __init__(self, scores):
        self._scores = np.asarray(scores, dtype=np.float64)

    def scores(self, query: str) -> np.ndarray:
        return self._scores


def test_documents_past_the_first_stage_depth_follow_the_first_stage_score():
    garen = make_garen([[0]] * 8, [[0, 1, 2, 3, 4, 5]])
    garen.index = HandBuiltIndex([[0]] * 8, [[0, 1, 2, 3, 4, 5]])
    garen.index.bm25 = ScoredBm25([0, 0.5, 0, 0, 2.0, 1.0, 0, 0])  # rows 4 > 5 > 1 past the depth
    state = QueryState(Query("q", "x"), first_stage=[2, 0, 3], budget=100, first_stage_kind="bm25")
    # inside the first stage by rank (2, 0, 3); past it by score (4, 5, 1), not by row (1, 4, 5)
    assert garen.expand([0], observed=set(), state=state, room=6, explore=False) == [2, 0, 3, 4, 5, 1]


def test_document_level_variant_scores_every_neighbour_of_the_window():
    garen = make_garen(ring_neighbours(), MEMBERS, expansion_unit="document")
    log: list = []
    drive(garen.search(world_state()), {d: float(d % 7) for d in range(200)}, {}, log)
    first = next(r for r in log if isinstance(r, ScoreYesNo))
    # 20 window documents x 4 edges, less those in the window or repeated: more than K_g = 20 (sec. 6.2: up to 320)
    assert len(first.texts) > 20
    capped = make_garen(ring_neighbours(), MEMBERS, expansion_unit="document", k_documents=20)
    log = []
    drive(capped.search(world_state()), {d: float(d % 7) for d in range(200)}, {}, log)
    assert max(len(r.texts) for r in log if isinstance(r, ScoreYesNo)) <= 20


def test_first_stage_scores_every_document_as_its_search_does(tiny_index):
    from garen_infer.index.first_stage import all_scores
    from garen_infer.index.lexical.bm25 import BRIGHT_BM25, Bm25Index

    query = "python dictionary key lookup"
    for index in (tiny_index.bm25, Bm25Index.build(["python dict", "key lookup in python", "lava"], BRIGHT_BM25)):
        scores = index.scores(query)
        for row, score in index.search([query], k=10)[0]:
            assert scores[row] == np.float32(score) or abs(scores[row] - score) < 1e-6
    dense = all_scores(tiny_index, "dense", query)
    assert dense.shape == (len(tiny_index.doc_ids),) and int(np.argmax(dense)) == tiny_index.doc_ids.index("py2")

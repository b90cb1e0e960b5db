"""Mining labels on a hand-built case, worked by hand: a GAREN traversal driven by a scripted reranker and
navigator over hand-built groups, then the labelling rules; the evaluation-split guard; the mined folder's
contract (trusted only when finished, evaluation data never trains)."""

from __future__ import annotations

import json

import pytest
from test_garen import drive, make_garen

from garen_infer.data.dataset import Document, Query
from garen_infer.errors import GarenError
from garen_infer.methods.base import QueryState
from garen_train.mining.folder import check_training_data, read_mined, write_mined
from garen_train.mining.guard import EvaluationOverlap, check_disjoint, find_overlap
from garen_train.mining.pairs import NegativeSampling, document_pairs, group_pairs

# ---- the hand-built world ----------------------------------------------------------------------------------
# 12 documents in 4 groups of 3: G0 = {0, 1, 2}, G1 = {3, 4, 5}, G2 = {6, 7, 8}, G3 = {9, 10, 11}.
# k-NN edges reach G1 and G2 from G0, and nothing ever points into G3.
MEMBERS = [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]]
NEIGHBOURS = [[1, 3], [0, 6], [0, 1], [4, 5], [3, 5], [3, 4], [7, 8], [6, 8], [6, 7], [10, 11], [9, 11], [9, 10]]
FIRST_STAGE = [0, 1, 2, 3, 5, 6, 7, 8, 4, 9, 10, 11]
GOLD = {4, 10}  # in G1 and G3
NAVIGATOR = {"G0: group 0": 0.2, "G1: group 1": 0.9, "G2: group 2": 0.5, "G3: group 3": 0.1}
QUERY = Query("q", "query")


def traverse():
    """GAREN with w = 4, h = 2, budget 8 (3 iterations) and K_g = 1. By hand, with a reranker that keeps every
    window in order (all relevances 0):
      t=1  W = [0 1 2 3]; candidate votes G0 3, G1 2, G2 1 -> score G0 (0.2). G0 has nothing unobserved, so
           the 2 slots fill from R0: 5, 6.
      t=2  W = [0 1 5 6]; votes G0 2, G1 2, G2 2, unscored G1, G2 -> score G1 (0.9, first seen). Expand G1: 4;
           fill 7.
      t=3  W = [0 1 4 7]: rerank only.
    So G0 is scored at t=1 (negative), G1 at t=2 (gold), G2 never (not gold: no line), G3 never (gold: unreached).
    """
    garen = make_garen(NEIGHBOURS, MEMBERS, window=4, keep=2, budget=8, k_groups=1)
    state = QueryState(QUERY, FIRST_STAGE, 8)
    drive(garen.search(state), {}, NAVIGATOR, [])
    return garen, state


def test_group_labels_by_hand():
    garen, state = traverse()
    assert [(s["t"], s["scored"]) for s in state.trace["iterations"]] == [(1, [0]), (2, [1])]
    lines = group_pairs(QUERY, state.trace["iterations"], GOLD, garen.doc_group, garen.texts)
    assert [(g["item"], g["label"], g["provenance"], g["iteration"]) for g in lines] == [
        ("0", 0, "scored", 1),
        ("1", 1, "scored", 2),
        ("3", 1, "unreached_gold", None),
    ]
    assert [g["text"] for g in lines] == ["G0: group 0", "G1: group 1", "G3: group 3"]  # what the navigator read
    assert all(g["kind"] == "group" and g["qid"] == "q" and g["query"] == "query" and g["rank"] is None for g in lines)


def test_a_query_without_gold_has_only_scored_negatives():
    garen, state = traverse()
    lines = group_pairs(QUERY, state.trace["iterations"], set(), garen.doc_group, garen.texts)
    assert [(g["item"], g["label"]) for g in lines] == [("0", 0), ("1", 0)]


DOCS = [Document(f"d{i}", f"text {i}", title=f"title {i}") for i in range(12)]
DOC_INDEX = {d.id: i for i, d in enumerate(DOCS)}


def test_document_labels_by_hand():
    query = Query("q", "query", excluded_ids=frozenset({"d5"}))
    judgments = {"d4": 1, "d10": 2, "d2": 0}
    lines = document_pairs(query, judgments, FIRST_STAGE, DOCS, DOC_INDEX, NegativeSampling(count=3, depth=6, skip=1))
    # judged, by first-stage rank: d2 (rank 3, judged not relevant), d4 (rank 9), d10 (rank 11);
    # negatives from ranks 2..6 = rows 1, 2, 3, 5, 6, without judged d2 and excluded d5: rows 1, 3, 6
    assert [(d["item"], d["label"], d["provenance"], d["rank"]) for d in lines] == [
        ("d2", 0, "judged", 3), ("d4", 1, "judged", 9), ("d10", 1, "judged", 11),
        ("d1", 0, "hard_negative", 2), ("d3", 0, "hard_negative", 4), ("d6", 0, "hard_negative", 6),
    ]
    assert lines[0]["text"] == "title 2\ntext 2"  # Document.full_text, what a pointwise reranker reads


def test_a_judged_document_beyond_the_first_stage_has_no_rank():
    lines = document_pairs(QUERY, {"d11": 1}, FIRST_STAGE[:5], DOCS, DOC_INDEX, NegativeSampling(count=0))
    assert [(d["item"], d["rank"]) for d in lines] == [("d11", None)]


def test_random_negatives_are_a_seeded_sample_in_rank_order():
    sample = NegativeSampling(count=3, depth=12, strategy="random", seed=7)
    lines = document_pairs(QUERY, {"d4": 1}, FIRST_STAGE, DOCS, DOC_INDEX, sample)
    negatives = [d["rank"] for d in lines if d["provenance"] == "hard_negative"]
    assert len(negatives) == 3 and negatives == sorted(negatives) and 9 not in negatives  # d4 is at rank 9
    assert lines == document_pairs(QUERY, {"d4": 1}, FIRST_STAGE, DOCS, DOC_INDEX, sample)
    other = NegativeSampling(count=3, depth=12, strategy="random", seed=8)
    assert {d["item"] for d in document_pairs(QUERY, {"d4": 1}, FIRST_STAGE, DOCS, DOC_INDEX, other)} != {
        d["item"] for d in lines
    }


@pytest.mark.parametrize("options", [{"strategy": "hardest"}, {"skip": 5, "depth": 3}, {"count": -1}])
def test_bad_negative_sampling_is_one_clear_error(options):
    with pytest.raises(GarenError, match="negative"):
        NegativeSampling(**options)


# ---- the evaluation-split guard ------------------------------------------------------------------------------
TEST_SPLIT = [Query("t1", "Obesity decreases life quality."), Query("t2", "a query")]


def test_overlap_by_id_and_by_text_ignoring_case_and_spacing():
    train = [Query("t2", "another text"), Query("x1", "obesity  decreases LIFE quality."), Query("x2", "fine")]
    found = find_overlap(train, "scifact/test", TEST_SPLIT)
    assert [(o.qid, o.evaluation_qid, o.by) for o in found] == [("t2", "t2", "id"), ("x1", "t1", "text")]


def test_the_guard_names_the_queries_and_the_split_in_one_line():
    train = [Query(f"x{i}", "a query") for i in range(7)]
    with pytest.raises(EvaluationOverlap) as err:
        check_disjoint(train, "scifact/train", {"scifact/test": TEST_SPLIT})
    message = str(err.value)
    assert "\n" not in message
    assert message == ("queries of scifact/train are evaluation queries: 7 in evaluation split scifact/test "
                       "(x0 (text of t2), x1 (text of t2), x2 (text of t2), x3 (text of t2), x4 (text of t2) "
                       "and 2 more)")
    check_disjoint([Query("x", "fine")], "scifact/train", {"scifact/test": TEST_SPLIT})  # disjoint: no error


# ---- the folder contract -------------------------------------------------------------------------------------
def line(qid, query, label=1):
    return {"qid": qid, "query": query, "kind": "group", "item": "0", "text": "G", "label": label,
            "provenance": "scored", "iteration": 1, "rank": None, "score": None}


def write(folder, purpose, lines):
    return write_mined(folder, lines, [], {"purpose": purpose, "dataset": {"name": folder.name}})


def test_a_mined_folder_reads_back_and_evaluation_data_never_trains(tmp_path):
    train = write(tmp_path / "train", "training", [line("a", "first"), line("b", "second", 0)])
    assert train["files"]["groups.jsonl"]["lines"] == 2
    write(tmp_path / "test", "evaluation", [line("t", "third")])
    mined = read_mined(tmp_path / "train", purpose="training")
    assert [g["qid"] for g in mined.groups] == ["a", "b"] and mined.documents == []
    check_training_data(mined, read_mined(tmp_path / "test"))
    with pytest.raises(GarenError, match="with --evaluation; it may validate or test a model, never train one"):
        read_mined(tmp_path / "test", purpose="training")

    write(tmp_path / "leaky", "evaluation", [line("t", "SECOND")])
    with pytest.raises(EvaluationOverlap, match=r"1 in evaluation split .*leaky.* \(b \(text of t\)\)"):
        check_training_data(mined, read_mined(tmp_path / "leaky"))


def test_a_folder_is_trusted_only_when_finished_and_unchanged(tmp_path):
    folder = tmp_path / "mined"
    write(folder, "training", [line("a", "first")])
    with open(folder / "groups.jsonl", "a") as handle:
        handle.write(json.dumps(line("z", "added later")) + "\n")
    with pytest.raises(GarenError, match="does not match manifest.json"):
        read_mined(folder)
    with open(folder / "groups.jsonl", "a") as handle:
        handle.write('{"qid": "torn')  # a torn last line reads as a changed file too, not as a JSON traceback
    with pytest.raises(GarenError, match="does not match manifest.json"):
        read_mined(folder)
    (folder / "manifest.json").unlink()
    with pytest.raises(GarenError, match="not a finished 'garen-train mine' output"):
        read_mined(folder)


def test_a_rewrite_that_dies_leaves_no_trusted_folder(tmp_path, monkeypatch):
    folder = tmp_path / "mined"
    write(folder, "training", [line("a", "first")])
    import garen_train.mining.folder as module

    def dies(path, lines):
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "write_jsonl", dies)
    with pytest.raises(KeyboardInterrupt):
        write(folder, "training", [line("b", "second")])
    with pytest.raises(GarenError, match="not a finished"):  # the old manifest went first: nothing reads as done
        read_mined(folder)


def test_a_hand_edited_purpose_is_not_trusted(tmp_path):
    folder = tmp_path / "test"
    write(folder, "evaluation", [line("t", "third")])
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "purpose": "training"}))
    with pytest.raises(GarenError,
                       match=r"manifest.json: edited after mining \(its content, 'purpose' included, no "
                       r"longer matches"):
        read_mined(folder, purpose="training")

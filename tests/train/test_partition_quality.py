"""Partition quality (garen_train.partition.quality) worked by hand on two triangles joined by one edge:

    0 - 1        3 - 4          edges (0,1) (0,2) (1,2) (2,3) (3,4) (3,5) (4,5), weight 1
     \\ /        / \\ /          degrees 2 2 3 3 2 2, 2m = 14
      2 ------ 3 - 5
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from garen_train.partition.quality import adjusted_rand_index, partition_quality

EDGES = [(0, 1), (0, 2), (1, 2), (2, 3), (3, 4), (3, 5), (4, 5)]


def two_triangles():
    pairs = sorted(EDGES + [(b, a) for a, b in EDGES])
    src, dst = torch.tensor([a for a, _ in pairs]), torch.tensor([b for _, b in pairs])
    weight = torch.ones(len(pairs))
    return SimpleNamespace(src=src, dst=dst, weight=weight, degree=torch.zeros(6).index_add_(0, src, weight))


def test_disjoint_groups():
    quality = partition_quality(two_triangles(), [(0,), (0,), (0,), (1,), (1,), (1,)], 2)
    # Q = 12/14 - (7^2 + 7^2)/14^2; each triangle: cut 1, volume 7
    assert quality["modularity"] == pytest.approx(12 / 14 - 98 / 196, abs=1e-4)
    assert quality["modularity_primary"] == quality["modularity"]
    assert quality["conductance_mean"] == pytest.approx(1 / 7, abs=1e-4)
    assert quality["overlap_rate"] == 0 and quality["memberships_per_doc"] == 1


def test_a_document_in_both_groups_belongs_half_to_each():
    quality = partition_quality(two_triangles(), [(0,), (0,), (0, 1), (1,), (1,), (1,)], 2)
    # edge term: 1 + .5 + .5 + .5 + 1 + 1 + 1 = 5.5 per direction; volumes 2+2+1.5 = 5.5 and 1.5+3+2+2 = 8.5
    assert quality["modularity"] == pytest.approx(11 / 14 - (5.5**2 + 8.5**2) / 196, abs=1e-4)
    # A = {0,1,2}: cut (2,3) = 1, volume 7; B = {2,3,4,5}: cut (2,0) (2,1) = 2, volume 10, complement 4
    assert quality["conductance_mean"] == pytest.approx((1 / 7 + 2 / 4) / 2, abs=1e-4)
    assert quality["overlap_rate"] == pytest.approx(1 / 6, abs=1e-4) and quality["size_max"] == 4


def test_adjusted_rand_index():
    assert adjusted_rand_index([0, 0, 1, 1], [5, 5, 3, 3]) == pytest.approx(1.0)
    assert adjusted_rand_index([0, 0, 1, 1], [0, 0, 1, 2]) == pytest.approx(4 / 7)  # (1 - 1/3) / (3/2 - 1/3)

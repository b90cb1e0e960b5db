"""LATTICE's calibration model: it recovers known per-slate biases, its hand-written gradients and optimiser equal
torch's autograd and AdamW (the reference code's implementation), and its normalisation is guarded."""

from __future__ import annotations

import numpy as np
import pytest

from garen_infer.methods.lattice.calibration import (
    Calibration,
    CalibrationParams,
    SlateData,
    loss_and_gradients,
)


def biased_slates(seed=0, n_nodes=30, n_slates=12):
    """Slates of 8 random nodes plus two recurring references; observed = true relevance + the slate's bias."""
    rng = np.random.default_rng(seed)
    truth = rng.uniform(0.1, 0.9, n_nodes)
    bias = rng.uniform(-0.15, 0.15, n_slates)
    calibration = Calibration()
    for s in range(n_slates):
        nodes = [int(i) for i in rng.choice(np.arange(2, n_nodes), 8, replace=False)] + [0, 1]
        calibration.add({n: float(np.clip(truth[n] + bias[s], 0, 1)) for n in nodes})
    return calibration, truth, bias


def test_calibration_recovers_known_slate_biases():
    calibration, truth, bias = biased_slates()
    fit = calibration.fit()
    # b_s / tau estimates the slate's offset up to one constant shared by all slates (theta absorbs the rest)
    estimated = np.array(fit.biases) / calibration.params.tau
    assert np.abs((estimated - estimated.mean()) - (bias - bias.mean())).max() < 0.02
    # the latent scores order the nodes by true relevance better than averaging the raw scores does
    from scipy.stats import spearmanr

    raw: dict[int, list[float]] = {}
    for slate, scores in zip(calibration.slates, calibration.scores):
        for node, score in zip(slate, scores):
            raw.setdefault(node, []).append(score)
    seen = sorted(raw)
    latent = spearmanr([fit.latent[n] for n in seen], truth[seen]).statistic
    averaged = spearmanr([np.mean(raw[n]) for n in seen], truth[seen]).statistic
    assert latent > 0.99 and latent > averaged
    assert max(fit.latent.values()) == pytest.approx(1.0)  # normalised so the best node is 1


def test_the_fit_is_deterministic():
    calibration, _, _ = biased_slates(seed=3)
    assert calibration.fit().latent == calibration.fit().latent


@pytest.mark.parametrize("lambda_mse", [1.0, 0.5, 0.0])
def test_gradients_equal_torch_autograd(lambda_mse):
    torch = pytest.importorskip("torch")
    calibration, _, _ = biased_slates(seed=1, n_slates=5)
    data = SlateData(calibration.slates, calibration.scores)
    params = CalibrationParams(lambda_mse=lambda_mse)
    rng = np.random.default_rng(2)
    theta, scale, bias = rng.normal(size=len(data.nodes)), 1.3, rng.normal(size=data.n_slates)
    loss, (d_theta, d_scale, d_bias) = loss_and_gradients(theta, scale, bias, data, params)

    T, A, B = (torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in (theta, scale, bias))
    expected = torch_loss(torch, T, A, B, data, params)
    expected.backward()
    assert loss == pytest.approx(expected.item(), rel=1e-12)
    np.testing.assert_allclose(d_theta, T.grad.numpy(), atol=1e-12)
    np.testing.assert_allclose(d_scale, [A.grad.item()], atol=1e-12)
    np.testing.assert_allclose(d_bias, B.grad.numpy(), atol=1e-12)


def test_fit_equals_torch_adamw_with_clipping():
    """200 steps of the reference's optimiser (AdamW lr 1e-2, wd 1e-4, grad-norm clip 1.0) from the same start."""
    torch = pytest.importorskip("torch")
    calibration, _, _ = biased_slates(seed=4, n_slates=6)
    params = CalibrationParams(lambda_mse=0.5)
    data = SlateData(calibration.slates, calibration.scores)
    start = np.random.default_rng(params.seed).normal(0.0, 0.01, len(data.nodes))
    T = torch.nn.Parameter(torch.tensor(start))
    A = torch.nn.Parameter(torch.tensor(1.0, dtype=torch.float64))
    B = torch.nn.Parameter(torch.zeros(data.n_slates, dtype=torch.float64))
    optimizer = torch.optim.AdamW([T, A, B], lr=params.lr, weight_decay=params.weight_decay)
    for _ in range(params.steps):
        optimizer.zero_grad()
        torch_loss(torch, T, A, B, data, params).backward()
        torch.nn.utils.clip_grad_norm_([T, A, B], params.clip)
        optimizer.step()

    calibration.params = params
    fit = calibration.fit()
    latent = (T.detach() * A.detach()).numpy()
    np.testing.assert_allclose([fit.latent[n] for n in data.nodes], latent / latent.max(), atol=1e-9)
    np.testing.assert_allclose(fit.biases, B.detach().numpy(), atol=1e-9)


def torch_loss(torch, T, A, B, data, p):
    """The reference code's loss, written with torch as it is there (padded slates, masked cumulative logsumexp)."""
    t = p.tau * T[torch.tensor(data.column)]
    mse = (
        torch.tensor(data.weight)
        * (A * t + B[torch.tensor(data.slate)] - p.tau * torch.tensor(data.score)) ** 2
    ).sum()
    if p.lambda_mse == 1.0:
        return mse
    where = (torch.tensor(data.slate), torch.tensor(data.position))
    mask = torch.zeros((data.n_slates, data.width), dtype=torch.bool).index_put(where, torch.tensor(True))
    padded = torch.zeros((data.n_slates, data.width), dtype=torch.float64).index_put(where, t)
    tail = torch.logcumsumexp(padded.masked_fill(~mask, float("-inf")).flip(1), 1).flip(1)
    nll = torch.where(mask, tail - padded, torch.zeros_like(padded)).sum(1).mean()
    return (1 - p.lambda_mse) * nll + p.lambda_mse * mse


def test_normalisation_is_guarded_when_every_latent_score_is_negative():
    # no optimisation steps: theta stays at its initial draw, which for seed 4 is negative for both nodes; the
    # reference code would divide by that negative maximum and flip the order
    calibration = Calibration(CalibrationParams(steps=0, seed=4))
    calibration.add({0: 0.5, 1: 0.2})
    fit = calibration.fit()
    start = np.random.default_rng(4).normal(0.0, 0.01, 2)
    assert [fit.latent[0], fit.latent[1]] == pytest.approx(start.tolist())  # left as they are, order kept
    assert Calibration().fit().latent == {}  # nothing to fit yet

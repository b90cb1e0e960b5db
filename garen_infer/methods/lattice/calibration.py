"""LATTICE's score calibration (Gupta et al., "LLM-guided Hierarchical Search for End-to-end Reasoning
Intensive Retrieval", arXiv 2510.13217, sec. 2.2; the reference code's behaviour).

A slate's scores mix a node's relevance with the slate's own offset (the same passage scores higher among weak
neighbours). Every node seen in any slate gets one latent score theta, every slate a bias b_s, and one scale a
is shared; reference nodes that recur across slates tie the biases together. Refit from scratch on all slates so
far after every iteration:

    t = tau * theta[node]
    MSE   = sum_w (a * t + b_s - tau * score)^2 / sum_w,     w = max(0.1, sigmoid(score - 0.5))
    PL    = mean over slates of the Plackett-Luce negative log-likelihood of the slate's order by score
    loss  = (1 - lambda_mse) * PL + lambda_mse * MSE          (lambda_mse = 1: the released code, PL off)

AdamW (lr 1e-2, weight decay 1e-4, torch's defaults otherwise), 200 full-batch steps, gradient norm clipped at 1.0,
theta ~ N(0, 0.01^2). The reference code does this with torch autograd; here the gradients are written out in
numpy (the test suite checks them against torch's autograd and AdamW), which is about eight times faster on these
tiny problems, and a query refits up to 20 times.

The calibrated score of a node is theta * a, divided by the largest one so the best is 1; the reference code
divides unguarded (inf/nan when every score is <= 0): here the division only happens when the largest is > 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CalibrationParams:
    tau: float = 5.0  # pl_tau (reference code)
    lambda_mse: float = 1.0  # weight of the MSE term; 1.0 turns Plackett-Luce off (released run, "mse_calib")
    lr: float = 1e-2  # AdamW (reference code; the paper's App. B.1.2 says Adam, 100 steps)
    weight_decay: float = 1e-4
    steps: int = 200
    clip: float = 1.0  # gradient-norm clip
    seed: int = 0  # theta's initialisation

    betas = (0.9, 0.999)  # torch AdamW defaults, as the reference code uses
    eps = 1e-8


@dataclass
class Fit:
    latent: dict[int, float]  # node -> calibrated score (normalised theta * a)
    scale: float  # a
    biases: list[float]  # b_s per slate, in the order the slates were added


class SlateData:
    """All slates as flat arrays: entry e is node ``column[e]`` scored ``score[e]`` at ``position[e]`` of slate
    ``slate[e]``, each slate in descending score order (the order the Plackett-Luce term explains)."""

    def __init__(self, slates: list[list[int]], scores: list[list[float]]):
        self.nodes = list(dict.fromkeys(n for slate in slates for n in slate))
        index = {n: i for i, n in enumerate(self.nodes)}
        self.column = np.array([index[n] for slate in slates for n in slate])
        self.slate = np.array([s for s, slate in enumerate(slates) for _ in slate])
        self.position = np.array([i for slate in slates for i in range(len(slate))])
        self.score = np.array([v for values in scores for v in values], dtype=np.float64)
        self.n_slates, self.width = len(slates), max(len(s) for s in slates)
        weight = np.maximum(1.0 / (1.0 + np.exp(-(self.score - 0.5))), 0.1)
        self.weight = weight / weight.sum()


def loss_and_gradients(theta: np.ndarray, scale: float, bias: np.ndarray, data: SlateData, p: CalibrationParams):
    """The loss and its gradients with respect to (theta, a, b)."""
    t = p.tau * theta[data.column]
    residual = scale * t + bias[data.slate] - p.tau * data.score
    loss = float(data.weight @ residual**2)
    d_residual = 2 * data.weight * residual
    d_t = d_residual * scale
    d_scale = float(d_residual @ t)
    d_bias: np.ndarray = np.bincount(data.slate, weights=d_residual, minlength=data.n_slates)
    if p.lambda_mse != 1.0:
        nll, d_t_pl = plackett_luce(t, data)
        loss = (1 - p.lambda_mse) * nll + p.lambda_mse * loss
        d_t = (1 - p.lambda_mse) * d_t_pl + p.lambda_mse * d_t
        d_scale, d_bias = p.lambda_mse * d_scale, p.lambda_mse * d_bias
    d_theta = p.tau * np.bincount(data.column, weights=d_t, minlength=len(theta))
    return loss, (d_theta, np.array([d_scale]), d_bias)


def plackett_luce(t: np.ndarray, data: SlateData) -> tuple[float, np.ndarray]:
    """Mean over slates of -log P(observed order) = sum_i [logsumexp(t_i..t_n) - t_i], and its gradient in t:
    d/dt_j = sum_{i <= j} exp(t_j - logsumexp(t_i..t_n)) - 1."""
    where = (data.slate, data.position)
    padded = np.full((data.n_slates, data.width), -np.inf)
    padded[where] = t
    tail = np.logaddexp.accumulate(padded[:, ::-1], axis=1)[:, ::-1][where]  # logsumexp over positions >= i
    nll = float((tail - t).sum()) / data.n_slates
    shift = np.full(data.n_slates, -np.inf)
    np.maximum.at(shift, data.slate, t)  # per-slate max keeps the exponentials in range
    inverse = np.zeros((data.n_slates, data.width))
    inverse[where] = np.exp(shift[data.slate] - tail)
    reach = np.cumsum(inverse, axis=1)[where]  # sum over i <= j of exp(shift - tail_i)
    grad = (np.exp(t - shift[data.slate]) * reach - 1.0) / data.n_slates
    return nll, grad


class Calibration:
    def __init__(self, params: CalibrationParams = CalibrationParams()):
        self.params = params
        self.slates: list[list[int]] = []
        self.scores: list[list[float]] = []

    def add(self, scored: dict[int, float]) -> None:
        """One answered slate: node -> score in [0, 1], kept in descending score order (ties in slate order)."""
        if not scored:
            return
        ordered = sorted(scored.items(), key=lambda item: -item[1])
        self.slates.append([node for node, _ in ordered])
        self.scores.append([min(1.0, max(0.0, float(s))) for _, s in ordered])

    def fit(self) -> Fit:
        if not self.slates:
            return Fit({}, 1.0, [])
        p = self.params
        data = SlateData(self.slates, self.scores)
        theta = np.random.default_rng(p.seed).normal(0.0, 0.01, len(data.nodes))
        parameters = [theta, np.ones(1), np.zeros(data.n_slates)]
        adamw = AdamW(parameters, p)
        for _ in range(p.steps):
            _, grads = loss_and_gradients(parameters[0], parameters[1][0], parameters[2], data, p)
            adamw.step(clip_grad_norm(grads, p.clip))
        theta, scale, bias = parameters
        latent = theta * scale[0]
        top = latent.max()
        if top > 0:  # guarded: the reference divides by the max even when it is <= 0
            latent = latent / top
        return Fit({n: float(v) for n, v in zip(data.nodes, latent)}, float(scale[0]), bias.tolist())


def clip_grad_norm(grads, max_norm: float):
    """torch.nn.utils.clip_grad_norm_: scale every gradient by max_norm / (total norm + 1e-6) when that is < 1."""
    total = float(np.sqrt(sum(float(g @ g) for g in grads)))
    factor = min(1.0, max_norm / (total + 1e-6))
    return [g * factor for g in grads]


class AdamW:
    """torch.optim.AdamW's update (decoupled weight decay, bias-corrected moments), in place on numpy arrays."""

    def __init__(self, parameters: list[np.ndarray], p: CalibrationParams):
        self.parameters, self.p, self.t = parameters, p, 0
        self.m = [np.zeros_like(x) for x in parameters]
        self.v = [np.zeros_like(x) for x in parameters]

    def step(self, grads) -> None:
        (beta1, beta2), lr, self.t = self.p.betas, self.p.lr, self.t + 1
        correction1, correction2 = 1 - beta1**self.t, 1 - beta2**self.t
        for x, g, m, v in zip(self.parameters, grads, self.m, self.v):
            x *= 1 - lr * self.p.weight_decay
            m *= beta1
            m += (1 - beta1) * g
            v *= beta2
            v += (1 - beta2) * g * g
            x -= (lr / correction1) * m / (np.sqrt(v) / np.sqrt(correction2) + self.p.eps)

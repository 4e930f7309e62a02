"""ContrastiveLoss, MultiSimilarityLoss, ProxyAnchorLoss and SupConLoss against naive loops over the pairs,
anchors and proxies, hand-computed values, edge cases, argument checks, determinism and toy training."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from oml_losses import ContrastiveLoss, MultiSimilarityLoss, ProxyAnchorLoss, SupConLoss
from torch import Tensor, nn


def cos(a: Tensor, b: Tensor) -> Tensor:
    return (a * b).sum() / (a.norm() * b.norm())


def naive_contrastive(
    x: Tensor, labels: list[int], pos_margin: float, neg_margin: float, distance: str, reduction: str
) -> Tensor:
    """All pairs i < j; mean: sum / #nonzero for positive and for negative pairs (PML's AvgNonZeroReducer)."""
    pos: list[Tensor] = []
    neg: list[Tensor] = []
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            d = (x[i] - x[j]).norm() if distance == "l2" else 1 - cos(x[i], x[j])
            if labels[i] == labels[j]:
                pos.append(torch.relu(d - pos_margin))
            else:
                neg.append(torch.relu(neg_margin - d))
    if reduction == "none":
        return torch.stack(pos + neg)
    if reduction == "sum":
        return sum(pos + neg, x.new_zeros(()))
    total = x.new_zeros(())
    for terms in (pos, neg):
        nonzero = [t for t in terms if float(t.detach()) > 0]
        if nonzero:
            total = total + sum(nonzero) / len(nonzero)
    return total


def naive_multi_similarity(x: Tensor, labels: list[int], alpha: float, beta: float, base: float) -> Tensor:
    """Per anchor: 1/alpha log(1 + sum_pos exp(-alpha (S - base))) + 1/beta log(1 + sum_neg exp(beta (S - base)))."""
    losses = []
    for i in range(len(x)):
        pos_sum, neg_sum = x.new_zeros(()), x.new_zeros(())
        for j in range(len(x)):
            if j == i:
                continue
            s = cos(x[i], x[j])
            if labels[j] == labels[i]:
                pos_sum = pos_sum + torch.exp(-alpha * (s - base))
            else:
                neg_sum = neg_sum + torch.exp(beta * (s - base))
        losses.append(torch.log(1 + pos_sum) / alpha + torch.log(1 + neg_sum) / beta)
    return torch.stack(losses)


def naive_supcon(x: Tensor, labels: list[int], temperature: float) -> Tensor:
    """Per anchor with positives: -1/|P| sum_p log(exp(s_ip / t) / sum_{a != i} exp(s_ia / t)); in batch order."""
    losses = []
    for i in range(len(x)):
        positives = [p for p in range(len(x)) if p != i and labels[p] == labels[i]]
        if not positives:
            continue
        denominator = sum(torch.exp(cos(x[i], x[a]) / temperature) for a in range(len(x)) if a != i)
        terms = [torch.log(torch.exp(cos(x[i], x[p]) / temperature) / denominator) for p in positives]
        losses.append(-sum(terms) / len(positives))
    return torch.stack(losses) if losses else x.new_zeros(0)


def naive_proxy_anchor(
    x: Tensor, labels: list[int], proxies: Tensor, margin: float, alpha: float, reduction: str
) -> Tensor:
    """Per proxy c: pos = log(1 + sum_{y = c} exp(-alpha (s - margin))), neg = log(1 + sum_{y != c} exp(alpha (s +
    margin))); mean: sum pos / #proxies with a positive + sum neg / #proxies."""
    pos, neg, with_pos = [], [], 0
    for c in range(len(proxies)):
        pos_sum, neg_sum = x.new_zeros(()), x.new_zeros(())
        for i in range(len(x)):
            s = cos(x[i], proxies[c])
            if labels[i] == c:
                pos_sum = pos_sum + torch.exp(-alpha * (s - margin))
            else:
                neg_sum = neg_sum + torch.exp(alpha * (s + margin))
        with_pos += int(c in labels)
        pos.append(torch.log(1 + pos_sum))
        neg.append(torch.log(1 + neg_sum))
    if reduction == "none":
        return torch.stack(pos) + torch.stack(neg)
    if reduction == "sum":
        return sum(pos) + sum(neg)
    return sum(pos) / max(1, with_pos) + sum(neg) / len(proxies)


def random_batch(seed: int, dim: int = 5, n_labels: int = 5) -> tuple[Tensor, list[int]]:
    """Labels 0 .. n_labels - 1 with 1..4 instances each (label 0 has exactly one), shuffled; float64 features."""
    generator = torch.Generator().manual_seed(seed)
    counts = [1] + torch.randint(1, 5, (n_labels - 1,), generator=generator).tolist()
    labels = torch.repeat_interleave(torch.arange(n_labels), torch.tensor(counts))
    labels = labels[torch.randperm(len(labels), generator=generator)].tolist()
    x = torch.randn(len(labels), dim, dtype=torch.float64, generator=generator, requires_grad=True)
    return x, labels


SEEDS = [0, 1, 2, 3]
REDUCE: dict[str, Callable[[Tensor], Tensor]] = {"mean": torch.mean, "sum": torch.sum, "none": lambda v: v}


def assert_same_value_and_grad(loss: Tensor, expected: Tensor, params: list[Tensor]) -> None:
    assert loss.shape == expected.shape
    assert torch.allclose(loss, expected, atol=1e-6, rtol=0), (loss, expected)
    weights = torch.linspace(0.5, 1.5, loss.numel(), dtype=loss.dtype).reshape(loss.shape)
    grads = torch.autograd.grad((loss * weights).sum(), params, allow_unused=True)
    expected_grads = torch.autograd.grad((expected * weights).sum(), params, allow_unused=True)
    for grad, expected_grad in zip(grads, expected_grads):
        grad = torch.zeros_like(params[0]) if grad is None else grad
        expected_grad = torch.zeros_like(grad) if expected_grad is None else expected_grad
        assert torch.allclose(grad, expected_grad, atol=1e-6, rtol=0)


# ----------------------------------------------------------------------------------------------- naive checks


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(
    ("pos_margin", "neg_margin", "distance"), [(0.0, 1.0, "l2"), (0.5, 3.0, "l2"), (0.1, 0.9, "cosine")]
)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_contrastive_against_naive(
    seed: int, pos_margin: float, neg_margin: float, distance: str, reduction: str
) -> None:
    x, labels = random_batch(seed)
    loss = ContrastiveLoss(pos_margin, neg_margin, distance, reduction)(x, labels)
    expected = naive_contrastive(x, labels, pos_margin, neg_margin, distance, reduction)
    assert_same_value_and_grad(loss, expected, [x])


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("alpha", "beta", "base"), [(2.0, 50.0, 0.5), (1.0, 10.0, 0.0)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multi_similarity_against_naive(
    seed: int, alpha: float, beta: float, base: float, reduction: str
) -> None:
    x, labels = random_batch(seed)
    loss = MultiSimilarityLoss(alpha, beta, base, reduction)(x, labels)
    assert_same_value_and_grad(
        loss, REDUCE[reduction](naive_multi_similarity(x, labels, alpha, beta, base)), [x]
    )


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("temperature", [0.1, 0.5, 2.0])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_supcon_against_naive(seed: int, temperature: float, reduction: str) -> None:
    x, labels = random_batch(seed)
    loss = SupConLoss(temperature, reduction)(x, labels)
    assert_same_value_and_grad(loss, REDUCE[reduction](naive_supcon(x, labels, temperature)), [x])


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("margin", "alpha"), [(0.1, 32.0), (0.0, 4.0)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_proxy_anchor_against_naive(seed: int, margin: float, alpha: float, reduction: str) -> None:
    x, labels = random_batch(seed)
    criterion = ProxyAnchorLoss(7, 5, margin, alpha, reduction, generator=torch.Generator().manual_seed(seed))
    criterion.double()  # 7 proxies: labels 5 and 6 never appear in the batch
    loss = criterion(x, labels)
    expected = naive_proxy_anchor(x, labels, criterion.proxies, margin, alpha, reduction)
    assert_same_value_and_grad(loss, expected, [x, criterion.proxies])


# ------------------------------------------------------------------------------------------------ hand values


def test_contrastive_hand_computed() -> None:
    # points 0, 0.5, 0.8, 2.0 on a line, labels 0, 0, 1, 1; pos_margin 0.1, neg_margin 1.0:
    # positive pairs (0,1) d=0.5 -> 0.4, (2,3) d=1.2 -> 1.1;
    # negative pairs (0,2) d=0.8 -> 0.2, (0,3) d=2.0 -> 0, (1,2) d=0.3 -> 0.7, (1,3) d=1.5 -> 0;
    # mean = (0.4 + 1.1) / 2 + (0.2 + 0.7) / 2 (the two zero negatives are not counted) = 0.75 + 0.45 = 1.2
    x = torch.tensor([[0.0], [0.5], [0.8], [2.0]], dtype=torch.float64)
    labels = [0, 0, 1, 1]
    assert float(ContrastiveLoss(0.1, 1.0)(x, labels)) == pytest.approx(1.2)
    assert float(ContrastiveLoss(0.1, 1.0, reduction="sum")(x, labels)) == pytest.approx(2.4)
    none = ContrastiveLoss(0.1, 1.0, reduction="none")(x, labels)
    assert none.tolist() == pytest.approx([0.4, 1.1, 0.2, 0.0, 0.7, 0.0])
    criterion = ContrastiveLoss(0.1, 1.0)
    criterion(x, labels)
    assert criterion.last_logs == pytest.approx(
        {"pos_dist": 0.85, "neg_dist": 1.15, "active_pos": 1.0, "active_neg": 0.5}
    )
    # cosine: (1, 0), (0, 1), (-1, 0), labels 0, 0, 1: d = 1 - cos: d01 = 1, d02 = 2, d12 = 1;
    # pos_margin 0, neg_margin 1.5: positive (0,1) -> 1; negatives (0,2) -> 0, (1,2) -> 0.5; mean = 1 + 0.5
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64)
    assert float(ContrastiveLoss(0.0, 1.5, "cosine")(x, [0, 0, 1])) == pytest.approx(1.5)


def test_supcon_hand_computed() -> None:
    # (1, 0), (0, 1), (-1, 0), labels 0, 0, 1, t = 0.5: S01 = 0, S02 = -1, S12 = 0.
    # anchor 0: P = {1}: -log(e^0 / (e^0 + e^-2)) = log(1 + e^-2) = 0.126928
    # anchor 1: P = {0}: -log(e^0 / (e^0 + e^0)) = log 2 = 0.693147;  anchor 2: no positive, skipped
    # mean = (0.126928 + 0.693147) / 2 = 0.410038
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64)
    expected = [math.log(1 + math.exp(-2)), math.log(2)]
    assert SupConLoss(0.5, reduction="none")(x, [0, 0, 1]).tolist() == pytest.approx(expected)
    assert float(SupConLoss(0.5)(x, [0, 0, 1])) == pytest.approx(0.410038, abs=1e-6)


def test_multi_similarity_hand_computed() -> None:
    # the same points and labels, alpha 1, beta 2, base 0.5:
    # anchor 0: log(1 + e^{-(0 - 0.5)}) + 1/2 log(1 + e^{2 (-1 - 0.5)}) = log(1 + e^0.5) + log(1 + e^-3) / 2
    # anchor 1: log(1 + e^0.5) + 1/2 log(1 + e^{2 (0 - 0.5)}) = log(1 + e^0.5) + log(1 + e^-1) / 2
    # anchor 2: no positive: 1/2 log(1 + e^-3 + e^-1)
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64)
    pos = math.log(1 + math.exp(0.5))
    expected = [
        pos + math.log(1 + math.exp(-3)) / 2,
        pos + math.log(1 + math.exp(-1)) / 2,
        math.log(1 + math.exp(-3) + math.exp(-1)) / 2,
    ]
    assert MultiSimilarityLoss(1.0, 2.0, 0.5, "none")(x, [0, 0, 1]).tolist() == pytest.approx(expected)


def test_proxy_anchor_hand_computed() -> None:
    # proxies (1, 0), (0, 1); one sample (1, 0) of label 0; margin 0.1, alpha 1: s = 1 with proxy 0, 0 with 1.
    # pos: proxy 0 only (P+ = {0}): log(1 + e^{-(1 - 0.1)}); neg: proxy 0 has no negative (0), proxy 1:
    # log(1 + e^{0 + 0.1}); loss = log(1 + e^-0.9) / 1 + log(1 + e^0.1) / 2
    criterion = ProxyAnchorLoss(2, 2, margin=0.1, alpha=1.0).double()
    with torch.no_grad():
        criterion.proxies.copy_(torch.eye(2))
    loss = criterion(torch.tensor([[1.0, 0.0]], dtype=torch.float64), [0])
    assert float(loss.detach()) == pytest.approx(
        math.log(1 + math.exp(-0.9)) + math.log(1 + math.exp(0.1)) / 2
    )
    assert criterion.last_logs == {"accuracy": 1.0}


# ------------------------------------------------------------------------------------------------- edge cases


def all_losses() -> list[nn.Module]:
    return [
        ContrastiveLoss(),
        ContrastiveLoss(distance="cosine"),
        MultiSimilarityLoss(),
        SupConLoss(),
        ProxyAnchorLoss(6, 5, generator=torch.Generator().manual_seed(0)).double(),
    ]


@pytest.mark.parametrize("index", range(5))
@pytest.mark.parametrize(
    "labels", [[0, 1, 2, 3, 4, 5], [2, 2, 2, 2, 2, 2], [3]], ids=["no_pos", "no_neg", "one"]
)
def test_no_positive_or_no_negative_pair(index: int, labels: list[int]) -> None:
    criterion = all_losses()[index]
    x = torch.randn(len(labels), 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    x.requires_grad_(True)
    loss = criterion(x, labels)
    loss.backward()
    assert loss.ndim == 0 and torch.isfinite(loss) and torch.isfinite(x.grad).all()
    if isinstance(criterion, ContrastiveLoss):
        expected = naive_contrastive(
            x, labels, criterion.pos_margin, criterion.neg_margin, criterion.distance, "mean"
        )
    elif isinstance(criterion, MultiSimilarityLoss):
        expected = naive_multi_similarity(x, labels, 2.0, 50.0, 0.5).mean()
    elif isinstance(criterion, SupConLoss):
        expected = naive_supcon(x, labels, 0.1)
        expected = expected.mean() if len(expected) else x.new_zeros(())
    else:
        expected = naive_proxy_anchor(x, labels, criterion.proxies, 0.1, 32.0, "mean")
    assert torch.allclose(loss, expected, atol=1e-6)


def test_supcon_without_positives_is_zero_with_a_zero_gradient() -> None:
    x = torch.randn(4, 3, requires_grad=True)
    loss = SupConLoss()(x, [0, 1, 2, 3])
    loss.backward()
    assert float(loss.detach()) == 0 and bool((x.grad == 0).all())
    assert SupConLoss(reduction="none")(x, [0, 1, 2, 3]).shape == (0,)


def test_contrastive_without_active_pairs_is_zero() -> None:
    # positives at distance 0 (pos_margin 0) and negatives farther than neg_margin: no pair has a loss
    x = torch.tensor([[0.0], [0.0], [5.0], [5.0]], requires_grad=True)
    loss = ContrastiveLoss()(x, [0, 0, 1, 1])
    loss.backward()
    assert float(loss.detach()) == 0 and torch.isfinite(x.grad).all()


def test_large_scales_are_stable_in_float32() -> None:
    # S / t = 100 and beta * (S - base) = 500 overflow exp in float32: the logsumexp forms do not
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(2))
    x = torch.cat([x, x]).requires_grad_(True)  # duplicated rows: similarities of exactly 1
    labels = [0, 1, 2, 3, 0, 1, 2, 3] * 2
    for criterion in (
        MultiSimilarityLoss(alpha=200.0, beta=1000.0),
        SupConLoss(temperature=0.01),
        ProxyAnchorLoss(4, 4, alpha=1000.0, generator=torch.Generator().manual_seed(0)),
        ContrastiveLoss(),
    ):
        x.grad = None
        loss = criterion(x, labels)
        loss.backward()
        assert torch.isfinite(loss) and torch.isfinite(x.grad).all(), type(criterion).__name__


def test_labels_as_list_or_tensor_and_the_logs() -> None:
    x, labels = random_batch(5)
    for criterion in all_losses():
        by_list = criterion(x, labels)
        assert torch.equal(by_list, criterion(x, torch.tensor(labels)))
        assert criterion.last_logs and all(isinstance(v, float) for v in criterion.last_logs.values())
    similarity = MultiSimilarityLoss()
    similarity(x, labels)
    assert -1 <= similarity.last_logs["neg_sim"] <= 1 and -1 <= similarity.last_logs["pos_sim"] <= 1


# ------------------------------------------------------------------------------------------- argument checks


@pytest.mark.parametrize(
    ("factory", "kwargs", "name"),
    [
        (ContrastiveLoss, {"pos_margin": -0.1}, "pos_margin"),
        (ContrastiveLoss, {"pos_margin": "0.1"}, "pos_margin"),
        (ContrastiveLoss, {"pos_margin": True}, "pos_margin"),
        (ContrastiveLoss, {"neg_margin": None}, "neg_margin"),
        (ContrastiveLoss, {"pos_margin": 0.5, "neg_margin": 0.5}, "neg_margin"),
        (ContrastiveLoss, {"neg_margin": float("inf")}, "neg_margin"),
        (ContrastiveLoss, {"distance": "l1"}, "distance"),
        (ContrastiveLoss, {"reduction": "avg"}, "reduction"),
        (MultiSimilarityLoss, {"alpha": 0}, "alpha"),
        (MultiSimilarityLoss, {"beta": -1.0}, "beta"),
        (MultiSimilarityLoss, {"base": "half"}, "base"),
        (MultiSimilarityLoss, {"base": float("nan")}, "base"),
        (MultiSimilarityLoss, {"reduction": None}, "reduction"),
        (SupConLoss, {"temperature": -0.1}, "temperature"),
        (SupConLoss, {"temperature": 0}, "temperature"),
        (SupConLoss, {"temperature": "0.1"}, "temperature"),
        (SupConLoss, {"reduction": "max"}, "reduction"),
        (ProxyAnchorLoss, {"num_classes": 0, "in_features": 4}, "num_classes"),
        (ProxyAnchorLoss, {"num_classes": 3, "in_features": 4.0}, "in_features"),
        (ProxyAnchorLoss, {"num_classes": 3, "in_features": 4, "margin": -0.1}, "margin"),
        (ProxyAnchorLoss, {"num_classes": 3, "in_features": 4, "margin": [0.1]}, "margin"),
        (ProxyAnchorLoss, {"num_classes": 3, "in_features": 4, "alpha": 0.0}, "alpha"),
        (ProxyAnchorLoss, {"num_classes": 3, "in_features": 4, "reduction": "all"}, "reduction"),
    ],
)
def test_bad_arguments_name_themselves(factory: type[nn.Module], kwargs: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        factory(**kwargs)


def test_bad_batches() -> None:
    criterion = ProxyAnchorLoss(3, 4, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"labels must be in \[0, 3\), got the range \[0, 3\]"):
        criterion(torch.randn(2, 4), [0, 3])
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        criterion(torch.randn(2, 4), [-1, 0])
    with pytest.raises(ValueError, match=r"\[batch_size, 4\]"):
        criterion(torch.randn(2, 5), [0, 1])
    for loss in (ContrastiveLoss(), MultiSimilarityLoss(), SupConLoss(), criterion):
        with pytest.raises(ValueError, match="labels"):
            loss(torch.randn(3, 4), [0, 1])
        with pytest.raises(ValueError, match="features"):
            loss(torch.randn(3), [0, 1, 2])


# ------------------------------------------------------------------------------- proxies: init and determinism


def test_proxy_anchor_proxies_are_deterministic_and_exposed() -> None:
    state = torch.random.get_rng_state()
    first = ProxyAnchorLoss(10, 16, generator=torch.Generator().manual_seed(3))
    second = ProxyAnchorLoss(10, 16, generator=torch.Generator().manual_seed(3))
    assert torch.equal(torch.random.get_rng_state(), state)  # the global generator is not used
    assert torch.equal(first.proxies, second.proxies)
    assert not torch.equal(
        first.proxies, ProxyAnchorLoss(10, 16, generator=torch.Generator().manual_seed(4)).proxies
    )
    assert first.num_classes == 10 and first.in_features == 16 and first.proxies.shape == (10, 16)
    assert [name for name, _ in first.named_parameters()] == ["proxies"]
    # Kaiming normal, mode fan_out: std = sqrt(2 / fan_out) = sqrt(2 / num_classes)
    big = ProxyAnchorLoss(100, 1000, generator=torch.Generator().manual_seed(0)).proxies.detach()
    assert float(big.std()) == pytest.approx(math.sqrt(2 / 100), rel=0.02)


def test_proxy_anchor_proxies_get_gradients() -> None:
    x, labels = random_batch(6)
    criterion = ProxyAnchorLoss(5, 5, generator=torch.Generator().manual_seed(0)).double()
    criterion(x, labels).backward()
    grad = criterion.proxies.grad
    assert grad is not None and torch.isfinite(grad).all() and bool((grad.abs().sum(dim=1) > 0).all())


# --------------------------------------------------------------------------------------------- toy training


def toy_set() -> tuple[Tensor, Tensor]:
    """4 gaussian clusters in 8-D, separated along 2 dims and hidden by large noise along the other 6."""
    generator = torch.Generator().manual_seed(0)
    means = torch.tensor([[2.0, 2.0], [2.0, -2.0], [-2.0, 2.0], [-2.0, -2.0]]).repeat_interleave(8, dim=0)
    signal = means + 0.3 * torch.randn(32, 2, generator=generator)
    noise = 3.0 * torch.randn(32, 6, generator=generator)
    return torch.cat([signal, noise], dim=1), torch.arange(4).repeat_interleave(8)


def nearest_neighbour_accuracy(embeddings: Tensor, labels: Tensor, cosine: bool) -> float:
    x = nn.functional.normalize(embeddings, dim=1) if cosine else embeddings
    dist = torch.cdist(x, x).fill_diagonal_(torch.inf)
    return float((labels[dist.argmin(dim=1)] == labels).float().mean())


@pytest.mark.parametrize(
    ("make", "lr", "cosine"),
    [
        (lambda: ProxyAnchorLoss(4, 8, generator=torch.Generator().manual_seed(1)), 0.05, True),
        (lambda: MultiSimilarityLoss(), 0.1, True),
        (lambda: SupConLoss(), 0.1, True),
        (lambda: ContrastiveLoss(neg_margin=4.0), 0.05, False),
    ],
    ids=["proxy_anchor", "multi_similarity", "supcon", "contrastive"],
)
def test_training_on_separable_clusters(make: Callable[[], nn.Module], lr: float, cosine: bool) -> None:
    torch.manual_seed(0)
    features, labels = toy_set()
    model = nn.Linear(8, 8)
    criterion = make()
    optimizer = torch.optim.SGD([*model.parameters(), *criterion.parameters()], lr=lr)
    with torch.no_grad():
        first_loss = float(criterion(model(features), labels))
        assert (
            nearest_neighbour_accuracy(features, labels, cosine=False) < 0.6
        )  # the noise hides the clusters
        assert nearest_neighbour_accuracy(model(features), labels, cosine) < 0.6
    for _ in range(50):
        optimizer.zero_grad()
        criterion(model(features), labels).backward()
        optimizer.step()
    with torch.no_grad():
        assert float(criterion(model(features), labels)) < first_loss
        assert nearest_neighbour_accuracy(model(features), labels, cosine) == 1


# -------------------------------------------------------------------------------- pytorch-metric-learning


def test_the_same_values_as_pytorch_metric_learning() -> None:
    import pytorch_metric_learning.losses as pml  # a test dependency (the root project's dev extra)

    for seed in SEEDS:
        x, labels = random_batch(seed)
        y = torch.tensor(labels)
        normalised = nn.functional.normalize(x, dim=1)  # PML's default LpDistance normalises the features
        pairs = [
            (ContrastiveLoss()(normalised, y), pml.ContrastiveLoss()(x, y)),
            (ContrastiveLoss(0.2, 1.3)(normalised, y), pml.ContrastiveLoss(0.2, 1.3)(x, y)),
            (MultiSimilarityLoss()(x, y), pml.MultiSimilarityLoss()(x, y)),
            (SupConLoss(0.2)(x, y), pml.SupConLoss(0.2)(x, y)),
        ]
        ours = ProxyAnchorLoss(5, 5, generator=torch.Generator().manual_seed(seed)).double()
        theirs = pml.ProxyAnchorLoss(5, 5).double()
        theirs.proxies.data.copy_(ours.proxies.data)
        pairs.append((ours(x, y), theirs(x, y)))
        for mine, reference in pairs:
            assert torch.allclose(mine, reference, atol=1e-9)

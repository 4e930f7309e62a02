"""PCA (against numpy's SVD and the manual's examples), take_2d and assign_2d (against python loops)."""

import numpy as np
import pytest
import torch

from oml_core.utils.indexing import assign_2d, take_2d
from oml_core.utils.pca import PCA


def test_pca_round_trip_from_the_manual():
    embeddings = torch.rand(100, 5, generator=torch.Generator().manual_seed(0))
    pca = PCA(embeddings)
    recovered = pca.inverse_transform(pca.transform(embeddings))
    assert torch.all(torch.isclose(embeddings, recovered, atol=1e-6))


def test_principal_axes_number_from_the_manual():
    pca = PCA(torch.eye(4, 10, dtype=torch.float))
    assert pca.calc_principal_axes_number(pcf_variance=(0.5, 1)).tolist() == [2, 5]


@pytest.mark.parametrize("n, d", [(50, 6), (4, 7)])
def test_pca_agrees_with_numpy_svd(n, d):
    rng = np.random.default_rng(n + d)
    x = rng.normal(size=(n, d)) * np.arange(1, d + 1)  # distinct variances per axis
    pca = PCA(torch.tensor(x, dtype=torch.float64))
    centred = x - x.mean(axis=0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    m = len(s)
    np.testing.assert_allclose(pca.mean.numpy(), x.mean(axis=0), atol=1e-12)
    # the scatter matrix squares the singular values: a zero one comes back as sqrt(eps * scale)
    np.testing.assert_allclose(pca.singular_values[:m].numpy(), s, rtol=1e-9, atol=1e-6)
    np.testing.assert_allclose(pca.explained_variance[:m].numpy(), s**2 / (n - 1), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(pca.explained_variance_ratio.sum().item(), 1.0, atol=1e-12)
    assert pca.components.shape == (d, d)
    # axes agree up to their sign, for the axes with a non-zero variance
    for i in range(m if n > d else m - 1):
        axis = pca.components[i].numpy()
        assert min(np.abs(axis - vt[i]).max(), np.abs(axis + vt[i]).max()) < 1e-7
    projected = pca.transform(torch.tensor(x), n_components=2).numpy()
    np.testing.assert_allclose(np.abs(projected), np.abs(centred @ vt[:2].T), atol=1e-9)


def test_pca_agrees_with_the_pcf_metric():
    from oml_core.functional.metrics import calc_pcf

    embeddings = torch.randn(30, 8, generator=torch.Generator().manual_seed(3)) * torch.arange(1, 9)
    fractions = (0.1, 0.5, 0.9, 1.0)
    n_axes = PCA(embeddings).calc_principal_axes_number(fractions)
    assert torch.allclose(n_axes.float() / 8, calc_pcf(embeddings, fractions))


def test_pca_bad_inputs():
    with pytest.raises(ValueError, match=r"non-empty \[n, d\]"):
        PCA(torch.zeros(0, 3))
    pca = PCA(torch.rand(10, 3))
    with pytest.raises(ValueError, match="n_components must be in"):
        pca.transform(torch.rand(2, 3), n_components=4)
    with pytest.raises(ValueError, match="must have dim 3"):
        pca.transform(torch.rand(2, 2))
    with pytest.raises(ValueError, match=r"range \[0, 1\]"):
        pca.calc_principal_axes_number((1.5,))
    with pytest.raises(ValueError, match="no variance"):
        PCA(torch.ones(5, 3)).calc_principal_axes_number((0.5,))


def test_take_2d_matches_a_loop_with_repeats():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(6, 9, generator=g)
    indices = torch.randint(0, 9, (6, 12), generator=g)  # P > M: repeats are allowed
    expected = torch.tensor([[x[i, indices[i, j]].item() for j in range(12)] for i in range(6)])
    assert torch.equal(take_2d(x, indices), expected)
    assert take_2d(torch.tensor([[1, 2, 3]]), torch.tensor([[-1, 0]])).tolist() == [[3, 1]]


def test_assign_2d_matches_a_loop_and_works_in_place():
    g = torch.Generator().manual_seed(1)
    x = torch.zeros(5, 8)
    indices = torch.stack([torch.randperm(8, generator=g)[:3] for _ in range(5)])
    values = torch.rand(5, 3, generator=g)
    expected = torch.zeros(5, 8)
    for i in range(5):
        for j in range(3):
            expected[i, indices[i, j]] = values[i, j]
    out = assign_2d(x, indices, values)
    assert out is x and torch.equal(x, expected)


def test_take_and_assign_bad_inputs():
    with pytest.raises(ValueError, match="same N"):
        take_2d(torch.zeros(2, 3), torch.zeros(3, 1, dtype=torch.long))
    with pytest.raises(ValueError, match=r"within \[0, 2\]"):
        take_2d(torch.zeros(2, 3), torch.tensor([[3], [0]]))
    with pytest.raises(ValueError, match="integers"):
        take_2d(torch.zeros(2, 3), torch.zeros(2, 1))
    with pytest.raises(ValueError, match="shape of indices"):
        assign_2d(torch.zeros(2, 3), torch.zeros(2, 1, dtype=torch.long), torch.zeros(2, 2))

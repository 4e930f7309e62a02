"""Principal component analysis on torch tensors, in bounded memory."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from oml_core.utils.checks import check_in_range
from oml_core.utils.misc_torch import iter_chunks

#: Number of rows of the embeddings matrix centred at once when accumulating their scatter matrix.
PCA_CHUNK_SIZE = 2**14
#: Number of values (float64) of the embeddings matrix centred at once when accumulating their Gram matrix.
GRAM_CHUNK_VALUES = 2**22


#: The check of ``pcf_variance`` (and of ``fmr_vals``): a non-empty sequence of numbers in ``[0, 1]``, no ``bool``.
check_fractions = check_in_range


def _check_matrix(embeddings: Tensor) -> None:
    if embeddings.ndim != 2 or embeddings.shape[0] == 0 or embeddings.shape[1] == 0:
        raise ValueError(f"embeddings must be a non-empty [n, d] matrix, got shape {tuple(embeddings.shape)}")


def scatter_matrix(embeddings: Tensor) -> tuple[Tensor, Tensor]:
    """``(mean, S)`` with ``S = Xc^T Xc`` for the centred rows ``Xc = X - mean``, in float64.

    Accumulated over chunks of :data:`PCA_CHUNK_SIZE` rows, so no centred copy of the whole matrix is made:
    memory is ``O(d^2 + chunk * d)``.
    """
    _check_matrix(embeddings)
    x = embeddings.detach()
    n, d = x.shape
    mean = x.sum(dim=0, dtype=torch.float64) / n
    scatter = torch.zeros(d, d, dtype=torch.float64, device=x.device)
    for sl in iter_chunks(n, PCA_CHUNK_SIZE):
        centred = x[sl].double() - mean
        scatter += centred.T @ centred
    return mean, scatter


def gram_matrix(embeddings: Tensor) -> Tensor:
    """``G = Xc Xc^T`` (``[n, n]``, float64) for the centred rows ``Xc = X - mean`` of the ``[n, d]`` embeddings.

    Accumulated over chunks of columns (about :data:`GRAM_CHUNK_VALUES` values each; centring a column needs
    only its own mean), so no centred copy of the whole matrix is made: memory is ``O(n^2 + chunk)``.
    """
    _check_matrix(embeddings)
    x = embeddings.detach()
    n, d = x.shape
    mean = x.sum(dim=0, dtype=torch.float64) / n
    gram = torch.zeros(n, n, dtype=torch.float64, device=x.device)
    for sl in iter_chunks(d, max(1, GRAM_CHUNK_VALUES // n)):
        centred = x[:, sl].double() - mean[sl]
        gram += centred @ centred.T
    return gram


def explained_variances(embeddings: Tensor) -> Tensor:
    """The variances along the principal axes of the ``[n, d]`` embeddings, i.e. the squared singular values of
    the centred embeddings ``Xc``, descending, the first ``m = min(n, d)`` of them (float64). All ``nan`` when the
    embeddings are not finite.

    They are the eigenvalues of the smaller of the two symmetric matrices with the same non-zero eigenvalues:
    the ``[d, d]`` scatter matrix ``Xc^T Xc`` (:func:`scatter_matrix`) when ``n >= d``, the ``[n, n]`` Gram matrix
    ``Xc Xc^T`` (:func:`gram_matrix`) when ``n < d`` (with ``Xc = U S V^T``, they are ``V S^2 V^T`` and
    ``U S^2 U^T``).
    So 64 embeddings of dimension 4096 cost a ``64 x 64`` eigenproblem, not a ``4096 x 4096`` one.

    Raises:
        ValueError: the embeddings are not a non-empty ``[n, d]`` matrix.
    """
    _check_matrix(embeddings)
    n, d = embeddings.shape
    symmetric = gram_matrix(embeddings) if n < d else scatter_matrix(embeddings)[1]
    m = min(n, d)
    if not torch.isfinite(symmetric).all():
        return torch.full((m,), float("nan"), dtype=torch.float64)
    return torch.linalg.eigvalsh(symmetric.cpu()).flip(0).clamp(min=0)[:m]


def principal_axes_number(
    variances: Tensor, pcf_variance: Sequence[float], embeddings_dim: int
) -> Tensor | None:
    """The number of principal axes needed to explain each share ``r`` of the variance: the computation behind
    :meth:`PCA.calc_principal_axes_number` and :func:`~oml_core.functional.metrics.calc_pcf`.

    With :math:`\\lambda_1 \\ge \\ldots \\ge \\lambda_m` the ``variances`` (:func:`explained_variances`)
    and :math:`d` = ``embeddings_dim``, the result for ``r`` is the largest :math:`p \\le d` such that

    .. math::
        \\frac{\\sum_{i=1}^{p-1} \\lambda_i}{\\sum_{i=1}^{m} \\lambda_i} \\le r

    (OML's manual). The ratio is undefined (``0 / 0``) when the embeddings have no variance (a single item, or
    all equal, or not finite): the result is then ``None``, which each entry point reports in its own way.

    Args:
        variances: ``[m]`` variances along the principal axes, descending.
        pcf_variance: Values in range ``[0, 1]`` (:func:`~oml_core.utils.checks.check_in_range`).
        embeddings_dim: ``d``, the most axes there are.

    Returns:
        ``[len(pcf_variance)]`` long tensor of numbers of axes, or ``None`` without variance.
    """
    thresholds = torch.tensor(check_in_range(pcf_variance, "pcf_variance"), dtype=torch.float64)
    cumulative = torch.cumsum(variances.double().cpu(), dim=0)
    if not bool(cumulative[-1] > 0):
        return None
    ratio_cumsum = (cumulative / cumulative[-1]).clamp(max=1.0)
    n_axes = torch.searchsorted(ratio_cumsum, thresholds, right=True) + 1
    return n_axes.clamp(max=embeddings_dim)


class PCA:
    """Principal component analysis (PCA): estimate the principal axes, project on them and back.

    For the ``[n, d]`` embeddings ``X`` with mean :math:`\\mu`, the principal axes are the eigenvectors of the
    scatter matrix :math:`(X - \\mu)^T (X - \\mu) = V^T \\Sigma^2 V` (the right singular vectors of the centred
    data, as an SVD ``X - mu = U Sigma V^T`` gives), sorted by decreasing eigenvalue. Projection and its
    inverse are

    .. math::
        X' = (X - \\mu) V^T, \\qquad X = X' V + \\mu

    The scatter matrix is accumulated in float64 over chunks of rows and diagonalised with ``eigh``, so memory
    is ``O(d^2)`` whatever ``n``.

    Attributes:
        components: ``[d, d]`` principal axes (rows), sorted by ``explained_variance``.
        explained_variance: ``[d]`` variance along every axis (``n - 1`` degrees of freedom), i.e. the
            eigenvalues of the covariance matrix of the embeddings.
        explained_variance_ratio: ``[d]`` share of the total variance explained by every axis.
        singular_values: ``[d]`` singular values of the centred embeddings.
        mean: ``[d]`` per-feature empirical mean, ``embeddings.mean(dim=0)``.

    Example:
        >>> embeddings = torch.rand(100, 5)
        >>> pca = PCA(embeddings)
        >>> embeddings_recovered = pca.inverse_transform(pca.transform(embeddings))
        >>> torch.all(torch.isclose(embeddings, embeddings_recovered, atol=1.e-6))
        tensor(True)
    """

    def __init__(self, embeddings: Tensor) -> None:
        """
        Args:
            embeddings: Embeddings matrix with the shape of ``[n_embeddings, embeddings_dim]``.
        """
        mean, scatter = scatter_matrix(embeddings)
        n, d = embeddings.shape
        self.n_embeddings = n
        self.embeddings_dim = d
        if not torch.isfinite(scatter).all():
            raise ValueError("embeddings contain NaN or infinite values")
        eigenvalues, eigenvectors = torch.linalg.eigh(scatter)
        order = torch.argsort(eigenvalues, descending=True, stable=True)
        squared_singular = eigenvalues[order].clamp(min=0)
        dtype = embeddings.dtype if embeddings.dtype.is_floating_point else torch.float32
        self.mean = mean.to(dtype)
        self.components = eigenvectors[:, order].T.contiguous().to(dtype)
        self.singular_values = squared_singular.sqrt().to(dtype)
        self.explained_variance = (squared_singular / max(n - 1, 1)).to(dtype)
        total = squared_singular.sum()
        ratio = squared_singular / total if total > 0 else torch.full_like(squared_singular, float("nan"))
        self.explained_variance_ratio = ratio.to(dtype)
        self._squared_singular = squared_singular

    def _check(self, embeddings: Tensor, max_dim: int, name: str) -> None:
        if embeddings.ndim != 2 or not 0 < embeddings.shape[1] <= max_dim:
            raise ValueError(
                f"{name} must be [n, N] with 0 < N <= {max_dim}, got shape {tuple(embeddings.shape)}"
            )

    def transform(self, embeddings: Tensor, n_components: int | None = None) -> Tensor:
        """Project embeddings on the first ``n_components`` principal axes (all when ``None``).

        Args:
            embeddings: Matrix of shape ``[n_embeddings, embeddings_dim]``.
            n_components: The desired dimension of the output, in ``[1, embeddings_dim]``.

        Returns:
            ``[n_embeddings, n_components]`` transformed embeddings ``(X - mean) @ components[:n_components].T``.
        """
        self._check(embeddings, self.embeddings_dim, "embeddings")
        if embeddings.shape[1] != self.embeddings_dim:
            raise ValueError(f"embeddings must have dim {self.embeddings_dim}, got {embeddings.shape[1]}")
        n_components = self.embeddings_dim if n_components is None else n_components
        if not 1 <= n_components <= self.embeddings_dim:
            raise ValueError(f"n_components must be in [1, {self.embeddings_dim}], got {n_components}")
        return (embeddings - self.mean) @ self.components[:n_components].T

    def inverse_transform(self, embeddings: Tensor) -> Tensor:
        """Map transformed embeddings back to the original space: ``X' @ components[:N] + mean``.

        Args:
            embeddings: Matrix of shape ``[n_embeddings, N]`` where ``N <= embeddings_dim``.

        Returns:
            ``[n_embeddings, embeddings_dim]`` embeddings (exact when ``N == embeddings_dim``).
        """
        self._check(embeddings, self.embeddings_dim, "embeddings")
        return embeddings @ self.components[: embeddings.shape[1]] + self.mean

    def calc_principal_axes_number(self, pcf_variance: Sequence[float]) -> Tensor:
        """The number of principal axes needed to explain each share ``r`` of the variance in ``pcf_variance``.

        With :math:`\\lambda_1 \\ge \\ldots \\ge \\lambda_m` the variances along the axes
        (:math:`m = \\min(n, d)`: a centred ``[n, d]`` matrix has at most that many singular values), the result
        for ``r`` is the largest :math:`p \\le d` such that

        .. math::
            \\frac{\\sum_{i=1}^{p-1} \\lambda_i}{\\sum_{i=1}^{m} \\lambda_i} \\le r

        (computed by :func:`principal_axes_number`, as :func:`~oml_core.functional.metrics.calc_pcf` is).
        Without variance the ratio is ``0 / 0`` and there are no principal axes to count: a ``ValueError``
        (where ``calc_pcf``, a metric, gives ``nan``). ``pcf_variance`` is checked by
        :func:`~oml_core.utils.checks.check_in_range`: a ``bool`` is refused, as by ``calc_pcf``.

        Args:
            pcf_variance: Values in range ``[0, 1]``.

        Returns:
            ``[len(pcf_variance)]`` long tensor of numbers of axes.

        Raises:
            ValueError: ``pcf_variance`` empty, or with a value outside ``[0, 1]`` or a ``bool``; embeddings with
                no variance (all equal).

        Example:
            >>> PCA(torch.eye(4, 10, dtype=torch.float)).calc_principal_axes_number(pcf_variance=(0.5, 1))
            tensor([2, 5])
        """
        variances = self._squared_singular[: min(self.n_embeddings, self.embeddings_dim)]
        n_axes = principal_axes_number(variances, pcf_variance, self.embeddings_dim)
        if n_axes is None:
            raise ValueError(
                "the embeddings have no variance (a single item, or all equal): no principal axes"
            )
        return n_axes


__all__ = [
    "PCA",
    "GRAM_CHUNK_VALUES",
    "PCA_CHUNK_SIZE",
    "check_fractions",
    "explained_variances",
    "gram_matrix",
    "principal_axes_number",
    "scatter_matrix",
]

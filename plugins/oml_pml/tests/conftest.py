"""Fixtures of the oml_pml tests: a registry of the plugin alone, a seeded batch and an isolated oml cache dir."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from oml_core.registry import Registry


@pytest.fixture(scope="session")
def registry() -> Registry:
    """A registry of the built-ins and the ``oml_pml`` plugin only (strict: a broken plugin raises)."""
    return Registry(allow=["oml_pml"], strict=True)


def make_batch(
    n_labels: int = 4, n_instances: int = 4, dim: int = 384, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded features ``[n_labels * n_instances, dim]`` (a leaf that requires grad) and their labels, grouped by
    label: ``0, 0, .., 1, 1, ..``."""
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(n_labels * n_instances, dim, generator=generator).requires_grad_(True)
    return features, torch.arange(n_labels).repeat_interleave(n_instances)


@pytest.fixture(scope="session")
def batch() -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """:func:`make_batch` (a fixture, as test modules cannot import the conftest under importlib mode)."""
    return make_batch

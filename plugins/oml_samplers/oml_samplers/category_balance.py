"""The category balance sampler: ``n_categories`` x ``n_labels`` x ``n_instances`` per batch, drawn afresh."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch

from oml_core.interfaces.samplers import IBatchSampler
from oml_samplers.categories import Category, check_category_sizes, index_categories
from oml_samplers.checks import check_batch_size, check_bool, check_int
from oml_samplers.generators import make_generator
from oml_samplers.labels import as_labels_tensor
from oml_samplers.sampling import sample_with_fill


class CategoryBalanceSampler(IBatchSampler):
    """This sampler takes ``n_instances`` for each of the ``n_labels`` for each of the ``n_categories`` to
    form the batches. Thus, the batch size is ``n_instances x n_labels x n_categories``.

    Note, to form an epoch of batches we simply sample ``L / n_labels`` batches with repetition (``L`` is
    the number of unique labels), rounded up: an epoch has ``ceil(L / n_labels)`` batches, so never zero.
    Every batch is drawn independently of the others (labels and categories repeat across batches):

    - select ``n_categories`` distinct categories, with weights proportional to their numbers of unique
      labels if ``weight_categories``, uniformly otherwise;
    - for each chosen category select ``n_labels`` of its labels: without repetition if it has at least
      ``n_labels`` of them; otherwise (only allowed with ``resample_labels``) with repetition, every label
      of the category once and the missing ones drawn with repetition;
    - for each chosen label select ``n_instances`` of its instances: without repetition if it has at least
      ``n_instances`` of them, otherwise with repetition in the same way (a label with one item is allowed).

    A batch is laid out as ``n_categories`` blocks of ``n_labels * n_instances`` indices, one per category,
    each made of ``n_labels`` runs of ``n_instances`` indices, one per chosen label.

    Randomness comes only from ``generator`` (or a new one seeded with ``seed``, ``0`` by default), never
    from the global RNG: successive epochs differ, and two samplers built with the same seed yield the
    same sequence of epochs. An epoch is drawn in full when iteration starts.

    Args:
        labels: Labels to sample from (list, numpy array or tensor of ints, one per dataset item).
        label2category: Mapping from label to category (a str or an int), for exactly the labels of ``labels``.
        n_categories: The desired number of categories to sample for each batch, ``>= 1``.
        n_labels: The desired number of labels to sample for each category in batch, should be > 1.
        n_instances: The desired number of samples to sample for each label in batch, should be > 1.
        resample_labels: If ``True`` sample with repetition the labels of a category that has fewer than
            ``n_labels`` of them, otherwise raise an error in case of the labels lack in any category.
        weight_categories: If ``True`` sample categories for each batch with weights proportional to the
            number of unique labels in the categories.
        generator: The random generator to draw from (a CPU ``torch.Generator``).
        seed: Seed of a new generator when ``generator`` is not given.

    Raises:
        ValueError: ``labels`` are not a non-empty 1-D sequence of ints; ``label2category`` is not a mapping
            of int labels to str or int categories for exactly those labels; ``n_categories < 1`` or larger
            than the number of categories; ``n_labels < 2``; ``n_instances < 2``; a batch (``n_categories x
            n_labels x n_instances``) of more than ``MAX_BATCH_SIZE`` items (:mod:`oml_core.config.bounds`);
            a flag is not a bool;
            without ``resample_labels``, a category has fewer than ``n_labels`` labels (the error names it
            and its label count); both ``generator`` and ``seed`` are given.
    """

    def __init__(
        self,
        labels: Sequence[int] | Any,
        label2category: Mapping[int, Category],
        n_categories: int,
        n_labels: int,
        n_instances: int,
        resample_labels: bool = False,
        weight_categories: bool = True,
        generator: torch.Generator | None = None,
        seed: int | None = None,
    ) -> None:
        labels_t = as_labels_tensor(labels)
        self.n_categories = check_int(n_categories, "n_categories", "the number of categories in a batch", 1)
        self.n_labels = check_int(n_labels, "n_labels", "the number of labels of each category in a batch", 2)
        self.n_instances = check_int(n_instances, "n_instances", "the number of instances of each label", 2)
        check_batch_size(n_categories=self.n_categories, n_labels=self.n_labels, n_instances=self.n_instances)
        self.resample_labels = check_bool(resample_labels, "resample_labels")
        self.weight_categories = check_bool(weight_categories, "weight_categories")
        self._index = index_categories(labels_t, label2category)
        n_found = len(self._index.categories)
        if n_categories > n_found:
            raise ValueError(
                f"n_categories ({n_categories}) must not exceed the number of categories in label2category "
                f"({n_found})"
            )
        if not resample_labels:
            check_category_sizes(
                self._index, n_labels, "; pass resample_labels=True to sample their labels with repetition"
            )
        self._label_positions = [torch.tensor(positions) for positions in self._index.labels_by_category]
        sizes = [len(positions) for positions in self._label_positions]
        self._category_weights = torch.tensor(
            sizes if weight_categories else [1] * n_found, dtype=torch.float
        )
        self.generator = make_generator(generator, seed)

    @property
    def batch_size(self) -> int:
        """``n_categories * n_labels * n_instances``."""
        return self.n_categories * self.n_labels * self.n_instances

    def __len__(self) -> int:
        """The number of batches in an epoch: ``ceil(L / n_labels)``."""
        return -(-len(self._index.unique_labels) // self.n_labels)

    def _sample_batch(self) -> list[int]:
        chosen = torch.multinomial(self._category_weights, self.n_categories, generator=self.generator)
        batch: list[int] = []
        for category in chosen.tolist():
            positions = self._label_positions[category]
            for label_pos in sample_with_fill(positions, self.n_labels, self.generator).tolist():
                ids = self._index.ids_by_label[label_pos]
                batch.extend(sample_with_fill(ids, self.n_instances, self.generator).tolist())
        return batch

    def __iter__(self) -> Iterator[list[int]]:
        """Draw an epoch; iterate over its ``len(self)`` batches of ``batch_size`` indices."""
        return iter([self._sample_batch() for _ in range(len(self))])


__all__ = ["CategoryBalanceSampler"]

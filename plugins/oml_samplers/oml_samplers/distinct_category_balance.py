"""The distinct category balance sampler: categories and labels are not reused until they run out."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch

from oml_core.interfaces.samplers import IBatchSampler
from oml_samplers.categories import Category, check_category_sizes, index_categories
from oml_samplers.checks import check_batch_size, check_int
from oml_samplers.generators import make_generator
from oml_samplers.labels import as_labels_tensor
from oml_samplers.sampling import choose, sample_with_fill


class _Cycle:
    """The state of one pass over the labels: the unused and used label positions of every category."""

    def __init__(self, labels_by_category: list[list[int]]) -> None:
        self.unused = [list(positions) for positions in labels_by_category]
        self.used: list[list[int]] = [[] for _ in labels_by_category]

    def available(self) -> list[int]:
        """The categories that still have unused labels, in their fixed order."""
        return [c for c, unused in enumerate(self.unused) if unused]

    def take(self, category: int, n_labels: int, generator: torch.Generator) -> list[int]:
        """Choose ``n_labels`` distinct labels of ``category`` and mark them used.

        Unused labels are chosen without repetition; when fewer than ``n_labels`` are unused, all of them are
        taken and the missing ones are chosen from the used labels without repetition. A category left with
        a single unused label drops it (it counts as used until the next reset), so that a label is never
        left to form a batch alone.
        """
        unused, used = self.unused[category], self.used[category]
        if len(unused) >= n_labels:
            picked = [unused[i] for i in choose(len(unused), n_labels, generator)]
        else:
            picked = unused + [used[i] for i in choose(len(used), n_labels - len(unused), generator)]
        fresh = set(picked)
        used.extend(p for p in unused if p in fresh)
        self.unused[category] = unused = [p for p in unused if p not in fresh]
        if len(unused) == 1:
            used.extend(unused)
            self.unused[category] = []
        return picked


class DistinctCategoryBalanceSampler(IBatchSampler):
    """This sampler takes ``n_instances`` for each of the ``n_labels`` for each of the ``n_categories`` to
    form the batches. Thus, the batch size is ``n_instances x n_labels x n_categories``.

    The strategy for the dataset with ``L`` unique labels and ``C`` unique categories is the following:

    - Select ``n_categories`` of ``C`` for the 1st batch (uniformly, without repetition)
    - Select ``n_labels`` for each of the chosen categories for the 1st batch
    - Select ``n_instances`` for each of the chosen labels for the 1st batch
    - Define the set of available for the 2nd batch labels ``L^``: these are all the labels ``L`` except the
      ones chosen for the 1st batch
    - Define set of available categories ``C^``: these are all the categories corresponding to labels from
      ``L^``
    - Select ``n_categories`` from ``C^`` for the 2nd batch
    - Select ``n_labels`` for each category from ``L^`` for the 2nd batch
    - Select ``n_instances`` for each label for the 2nd batch
    - ...
    - Epoch ends after ``epoch_size`` steps (``len(sampler) == epoch_size``); every epoch starts afresh.

    Behavior in corner cases:

    - If all the categories were chosen before ``epoch_size`` steps, the sampler resets its state (every
      label is available again) and goes on sampling from the first step. Precisely, it resets before a step
      at which fewer than ``n_categories`` categories have available labels.
    - If some class does not contain ``n_instances``, a choice will be made with repetition (every instance
      once, the missing ones drawn with repetition), so a label with a single item is allowed.
    - If the chosen category does not contain unused ``n_labels``, all the unused labels will be added to a
      batch and the missing ones will be sampled from the used labels without repetition.
    - If ``L % n_labels == 1`` then one of the labels must be dropped because we always want to have more
      than 1 label in a batch to be able to form positive pairs later on. The rule is applied per category,
      where a lone label arises: when the labels of a category taken so far leave exactly one of them
      unused, that label is dropped until the next reset and the category is no longer available. With one
      category (``C == 1``) this is the rule as stated: ``L % n_labels == 1`` labels left over, one dropped.

    So between two resets no label is chosen twice, except the used labels that complete a category which
    has fewer than ``n_labels`` (and at least 2) unused labels. A batch is laid out as ``n_categories``
    blocks, one per category, each made of ``n_labels`` runs of ``n_instances`` indices, one per label.

    Randomness comes only from ``generator`` (or a new one seeded with ``seed``, ``0`` by default), never
    from the global RNG: successive epochs differ, and two samplers built with the same seed yield the
    same sequence of epochs. An epoch is drawn in full when iteration starts.

    Args:
        labels: Labels to sample from (list, numpy array or tensor of ints, one per dataset item).
        label2category: Mapping from label to category (a str or an int), for exactly the labels of ``labels``.
        n_categories: The desired number of categories to sample for each batch, ``>= 1``.
        n_labels: The desired number of labels to sample for each category in batch, should be > 1.
        n_instances: The desired number of samples to sample for each label in batch, should be > 1.
        epoch_size: The desired number of batches in epoch, ``>= 1``.
        generator: The random generator to draw from (a CPU ``torch.Generator``).
        seed: Seed of a new generator when ``generator`` is not given.

    Raises:
        ValueError: ``labels`` are not a non-empty 1-D sequence of ints; ``label2category`` is not a mapping
            of int labels to str or int categories for exactly those labels; ``n_categories < 1`` or larger
            than the number of categories; ``n_labels < 2``; ``n_instances < 2``; a batch (``n_categories x
            n_labels x n_instances``) of more than ``MAX_BATCH_SIZE`` items (:mod:`oml_core.config.bounds`);
            ``epoch_size < 1``; a
            category has fewer than ``n_labels`` labels (the error names it and its label count); both
            ``generator`` and ``seed`` are given.
    """

    def __init__(
        self,
        labels: Sequence[int] | Any,
        label2category: Mapping[int, Category],
        n_categories: int,
        n_labels: int,
        n_instances: int,
        epoch_size: int,
        generator: torch.Generator | None = None,
        seed: int | None = None,
    ) -> None:
        labels_t = as_labels_tensor(labels)
        self.n_categories = check_int(n_categories, "n_categories", "the number of categories in a batch", 1)
        self.n_labels = check_int(n_labels, "n_labels", "the number of labels of each category in a batch", 2)
        self.n_instances = check_int(n_instances, "n_instances", "the number of instances of each label", 2)
        check_batch_size(n_categories=self.n_categories, n_labels=self.n_labels, n_instances=self.n_instances)
        self.epoch_size = check_int(epoch_size, "epoch_size", "the number of batches in an epoch", 1)
        self._index = index_categories(labels_t, label2category)
        n_found = len(self._index.categories)
        if n_categories > n_found:
            raise ValueError(
                f"n_categories ({n_categories}) must not exceed the number of categories in label2category "
                f"({n_found})"
            )
        check_category_sizes(self._index, n_labels)
        self.generator = make_generator(generator, seed)

    @property
    def batch_size(self) -> int:
        """``n_categories * n_labels * n_instances``."""
        return self.n_categories * self.n_labels * self.n_instances

    def __len__(self) -> int:
        """The number of batches in an epoch: ``epoch_size``."""
        return self.epoch_size

    def __iter__(self) -> Iterator[list[int]]:
        """Draw an epoch; iterate over its ``epoch_size`` batches of ``batch_size`` indices."""
        cycle = _Cycle(self._index.labels_by_category)
        epoch = []
        for _ in range(self.epoch_size):
            available = cycle.available()
            if len(available) < self.n_categories:
                cycle = _Cycle(self._index.labels_by_category)
                available = cycle.available()
            batch: list[int] = []
            for i in choose(len(available), self.n_categories, self.generator):
                for label_pos in cycle.take(available[i], self.n_labels, self.generator):
                    ids = self._index.ids_by_label[label_pos]
                    batch.extend(sample_with_fill(ids, self.n_instances, self.generator).tolist())
            epoch.append(batch)
        return iter(epoch)


__all__ = ["DistinctCategoryBalanceSampler"]

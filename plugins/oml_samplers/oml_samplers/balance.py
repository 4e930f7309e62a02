"""The balance sampler: ``n_labels`` labels times ``n_instances`` instances per batch."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch

from oml_core.interfaces.samplers import IBatchSampler
from oml_core.utils.errors import OmlValueError
from oml_samplers.checks import check_batch_size, check_int
from oml_samplers.generators import make_generator
from oml_samplers.labels import as_labels_tensor, group_indices_by_label
from oml_samplers.sampling import sample_with_fill


class BalanceSampler(IBatchSampler):
    """This sampler takes ``n_instances`` for each of the ``n_labels`` to form the batches.

    Thus, the batch size is ``n_instances x n_labels``. This type of sampling can be found in the
    classical Person Re-Id paper "In Defense of the Triplet Loss for Person Re-Identification".

    The strategy for the dataset with ``L`` unique labels is the following, every epoch:

    - shuffle the ``L`` labels; the 1st batch takes the first ``n_labels`` of them, the 2nd batch the next
      ``n_labels`` of the ``L - n_labels`` remaining ones, and so on;
    - for each label of a batch, select ``n_instances`` of its instances: without repetition if the label
      has at least ``n_instances`` of them; otherwise the choice is made with repetition (every instance of
      the label once, the missing ones drawn with repetition), so a label with a single item is allowed;
    - the epoch ends after ``L // n_labels`` batches: if ``L % n_labels != 0``, the last incomplete batch is
      dropped (its labels change from epoch to epoch).

    Thus, in each epoch all the labels are selected once (when ``L % n_labels == 0``), but this does not
    mean that all the instances are picked. The instances of one label are contiguous in a batch.

    Randomness comes only from ``generator`` (or a new one seeded with ``seed``, ``0`` by default), never
    from the global RNG: successive epochs differ, and two samplers built with the same seed yield the
    same sequence of epochs. An epoch is drawn in full when iteration starts.

    Args:
        labels: List of the labels for each element in the dataset (list, numpy array or tensor of ints).
        n_labels: The desired number of labels in a batch, should be > 1.
        n_instances: The desired number of instances of each label in a batch, should be > 1.
        generator: The random generator to draw from (a CPU ``torch.Generator``).
        seed: Seed of a new generator when ``generator`` is not given.

    Raises:
        ValueError: ``labels`` are not a non-empty 1-D sequence of ints, ``n_labels < 2``,
            ``n_instances < 2``, a batch (``n_labels x n_instances``) of more than ``MAX_BATCH_SIZE`` items
            (:mod:`oml_core.config.bounds`), ``n_labels`` exceeds the number of unique labels, or both
            ``generator`` and ``seed`` are given.
    """

    def __init__(
        self,
        labels: Sequence[int] | Any,
        n_labels: int,
        n_instances: int,
        generator: torch.Generator | None = None,
        seed: int | None = None,
    ) -> None:
        labels_t = as_labels_tensor(labels)
        self.n_labels = check_int(n_labels, "n_labels", "the number of labels in a batch", 2)
        self.n_instances = check_int(n_instances, "n_instances", "the number of instances of each label", 2)
        check_batch_size(n_labels=self.n_labels, n_instances=self.n_instances)
        self._unique_labels, self._ids_by_label = group_indices_by_label(labels_t)
        if n_labels > len(self._unique_labels):
            raise OmlValueError(
                f"n_labels ({n_labels}) must not exceed the number of unique labels in the dataset "
                f"({len(self._unique_labels)})"
            )
        self.generator = make_generator(generator, seed)

    @property
    def batch_size(self) -> int:
        """``n_labels * n_instances``."""
        return self.n_labels * self.n_instances

    def __len__(self) -> int:
        """The number of batches in an epoch: ``L // n_labels``."""
        return len(self._unique_labels) // self.n_labels

    def _sample_instances(self, label_pos: int) -> list[int]:
        return sample_with_fill(self._ids_by_label[label_pos], self.n_instances, self.generator).tolist()

    def __iter__(self) -> Iterator[list[int]]:
        """Draw an epoch; iterate over its ``len(self)`` batches of ``n_labels * n_instances`` indices."""
        order = torch.randperm(len(self._unique_labels), generator=self.generator).tolist()
        epoch = []
        for i in range(len(self)):
            batch: list[int] = []
            for label_pos in order[i * self.n_labels : (i + 1) * self.n_labels]:
                batch.extend(self._sample_instances(label_pos))
            epoch.append(batch)
        return iter(epoch)


__all__ = ["BalanceSampler"]

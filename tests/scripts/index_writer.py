"""A writer of a gallery index for the kill tests of ``tests/test_index_changes.py``: it loads the index of
embeddings at ``FOLDER``, then puts one new item after another into it (ids ``FIRST``, ``FIRST + 1``, ...,
each embedded as :func:`vector`), committing each, and writes the id of every committed item to ``ACKS`` (a line
each, flushed) once its commit returned: an acknowledged change. It runs until it is killed.

Usage: ``python index_writer.py FOLDER FIRST ACKS``
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import torch

from oml_core.index import GalleryIndex

#: The dimension of the items' embeddings.
DIM = 4


def vector(item_id: int) -> torch.Tensor:
    """``[1, DIM]``: the embedding of the item ``item_id`` (drawn from a generator seeded by it)."""
    return torch.randn(1, DIM, generator=torch.Generator().manual_seed(item_id))


def write_forever(folder: Path, first: int, acks: Path) -> None:
    """Commit the items ``first, first + 1, ...`` into the index ``folder`` one by one, acknowledging each."""
    index = GalleryIndex.load(folder)
    with open(acks, "a") as out:
        for item_id in itertools.count(first):
            index.upsert(vector(item_id), ids=[item_id])
            index.commit()
            out.write(f"{item_id}\n")
            out.flush()


if __name__ == "__main__":
    write_forever(Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))

"""Search a gallery sharded over 2 CPU processes (gloo) and write what every rank found as JSON.

Usage: python ddp_sharded_knn.py OUT_DIR. The data (:func:`data`) are 61 items of 3-d embeddings with integer
coordinates in 0..2, so that many distances are equal (ties), labels, sequences of 1 to 3 items, and a query /
gallery split where some items are only queries and some only gallery. Rank ``r`` holds the items ``r, r + 2,
...``. Every rank writes ``OUT_DIR/rank<r>.json`` with, for several settings, the rows of ``search_sharded``'s
result, and the metrics of ``EmbeddingMetricsDDP(shard_gallery=True)`` fed with rank 1 also seeing item 0 (DDP's
padding).
"""

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from oml_core.interfaces.datasets import IQueryGalleryLabeledDataset
from oml_core.knn.search import KnnResult
from oml_core.knn.sharded import ShardedExactKnnIndex, search_sharded
from oml_core.metrics import EmbeddingMetricsDDP, flatten_metrics

N_ITEMS = 61
#: the settings searched: (name, distance, use sequences, top_n)
SETTINGS = (
    ("l2_self", "l2", False, 5),
    ("l2_sequences", "l2", True, 7),
    ("cosine_sequences", "cosine", True, 4),
)


def data() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(5)
    embeddings = torch.randint(0, 3, (N_ITEMS, 3), generator=generator).float()
    embeddings[embeddings.abs().sum(1) == 0] = 1.0  # no zero vector: cosine needs a direction
    labels = torch.randint(0, 6, (N_ITEMS,), generator=generator)
    sequences = torch.arange(N_ITEMS) // 3
    sequences[::4] = 100 + torch.arange(len(sequences[::4]))  # some items alone in their sequence
    is_query = torch.ones(N_ITEMS, dtype=torch.bool)
    is_gallery = torch.ones(N_ITEMS, dtype=torch.bool)
    is_query[::5] = False  # gallery only
    is_gallery[1::7] = False  # query only
    return {
        "embeddings": embeddings,
        "labels": labels,
        "sequences": sequences,
        "ids_query": is_query.nonzero().squeeze(1),
        "ids_gallery": is_gallery.nonzero().squeeze(1),
    }


class ArraysDataset(IQueryGalleryLabeledDataset):
    """The items of :func:`data` as a query/gallery dataset with a ``sequence`` column."""

    def __init__(self) -> None:
        self.data = data()
        self.extra_data = {"sequence": self.data["sequences"].numpy()}

    def __len__(self) -> int:
        return N_ITEMS

    def __getitem__(self, item: int) -> dict[str, Any]:
        return {self.index_key: item}

    def get_labels(self) -> np.ndarray:
        return self.data["labels"].numpy()

    def get_query_ids(self) -> torch.LongTensor:
        return self.data["ids_query"]

    def get_gallery_ids(self) -> torch.LongTensor:
        return self.data["ids_gallery"]


def rows(result: KnnResult) -> dict[str, Any]:
    return {
        "distances": [row.tolist() for row in result.distances],
        "retrieved_ids": [row.tolist() for row in result.retrieved_ids],
        "gt_ids": [row.tolist() for row in result.gt_ids],
        "n_gallery": result.n_gallery.tolist(),
    }


def worker(rank: int, out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{out_dir}/store", rank=rank, world_size=2)
    d = data()
    local = torch.arange(rank, N_ITEMS, 2)
    record: dict[str, Any] = {}
    for name, distance, sequences, top_n in SETTINGS:
        found = search_sharded(
            local,
            d["embeddings"][local],
            d["ids_query"],
            d["ids_gallery"],
            top_n,
            labels_gt=d["labels"],
            sequence_ids=d["sequences"] if sequences else None,
            distance=distance,
            chunk_size=4,  # several chunks of every process's queries
        )
        record[name] = rows(found)

    # rank 1 has no queries and rank 0 no gallery items
    index = ShardedExactKnnIndex("l2", chunk_size=3)
    if rank == 1:
        index.add(d["embeddings"][:20], torch.arange(20))
    queries = d["embeddings"][40:47] if rank == 0 else torch.empty(0, 3)
    found = index.search(queries, 4)
    record["lopsided"] = {"distances": found.distances.tolist(), "ids": found.ids.tolist()}

    metric = EmbeddingMetricsDDP(
        ArraysDataset(), cmc_top_k=(1, 3), map_top_k=(3,), pcf_variance=(), shard_gallery=True, verbose=False
    )
    metric.setup()
    seen = list(range(rank, N_ITEMS, 2)) + ([0] if rank == 1 else [])
    metric.update(d["embeddings"][seen], torch.tensor(seen))
    metric.sync()
    record["metrics"] = flatten_metrics(metric.compute_metrics())
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(record))
    dist.destroy_process_group()


if __name__ == "__main__":
    # forked: each process has this one's imports (spawned, each would import torch and oml_core again)
    mp.start_processes(worker, args=(sys.argv[1],), nprocs=2, join=True, start_method="fork")

"""Run EmbeddingMetricsDDP on 2 CPU processes (gloo) and write the metrics of every rank as JSON.

Usage: python ddp_embedding_metrics.py OUT_DIR. Rank r collects the items r, r + 2, r + 4, ... of a
random 1-vs-rest dataset; rank 1 also sees item 0 (as DDP pads its last batch with repeated items).
"""

import json
import sys
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from oml_core.interfaces.datasets import IQueryGalleryLabeledDataset
from oml_core.metrics import EmbeddingMetricsDDP, flatten_metrics

N_ITEMS = 30


class RandomDataset(IQueryGalleryLabeledDataset):
    def __len__(self) -> int:
        return N_ITEMS

    def __getitem__(self, item):
        return {self.index_key: item}

    def get_labels(self) -> np.ndarray:
        return np.arange(N_ITEMS) % 6

    def get_query_ids(self) -> torch.LongTensor:
        return torch.arange(N_ITEMS)

    def get_gallery_ids(self) -> torch.LongTensor:
        return torch.arange(N_ITEMS)


def embeddings() -> torch.Tensor:
    return torch.randn(N_ITEMS, 4, generator=torch.Generator().manual_seed(0))


def worker(rank: int, out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{out_dir}/store", rank=rank, world_size=2)
    metric = EmbeddingMetricsDDP(
        RandomDataset(), cmc_top_k=(1, 3), map_top_k=(3,), fmr_vals=(0.2,), verbose=False
    )
    metric.setup()
    ids = list(range(rank, N_ITEMS, 2)) + ([0] if rank == 1 else [])
    metric.update(embeddings()[ids], torch.tensor(ids))
    metric.sync()
    metrics = flatten_metrics(metric.compute_metrics())
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(metrics))
    dist.destroy_process_group()


if __name__ == "__main__":
    # forked: each process has this one's imports (spawned, each would import torch and oml_core again)
    mp.start_processes(worker, args=(sys.argv[1],), nprocs=2, join=True, start_method="fork")

"""``Accumulator.sync`` and ``EmbeddingMetrics`` (OML 4.0's way: no explicit ``sync``) on WORLD_SIZE CPU processes
(gloo), each writing what it got as JSON.

Usage: python ddp_accumulator.py OUT_DIR WORLD_SIZE.

Accumulator: rank r collects the samples r, r + W, r + 2W, ... of 0..9 (W = WORLD_SIZE), with the value
``10 * index`` under three keys (a tensor of rows [2], a numpy array, a list); rank W - 1 also collects sample 0
again, with another value (as DDP padding repeats items). Every rank writes the synced storage.

EmbeddingMetrics: the items of ``ddp_embedding_metrics.RandomDataset`` split the same way (rank W - 1 also sees
item 0); ``setup()`` as OML's callback calls it (the number of samples this process will see) on the even
ranks, without arguments on the odd ones; then ``compute_metrics()`` only. Every rank writes its metrics.
"""

import json
import sys
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from ddp_embedding_metrics import N_ITEMS, RandomDataset, embeddings

from oml_core.metrics import EmbeddingMetrics, flatten_metrics
from oml_core.metrics.accumulation import INDICES_KEY, Accumulator

N_SAMPLES = 10


def share(rank: int, world_size: int, n: int) -> list[int]:
    return list(range(rank, n, world_size)) + ([0] if rank == world_size - 1 else [])


def worker(rank: int, out_dir: str, world_size: int) -> None:
    dist.init_process_group("gloo", init_method=f"file://{out_dir}/store", rank=rank, world_size=world_size)
    ids = share(rank, world_size, N_SAMPLES)
    values = [10 * i if i or rank == 0 else -1 for i in ids]  # the repeated sample 0 has another value
    acc = Accumulator(keys_to_accumulate=("tensor", "array", "list"))
    acc.refresh(num_samples=len(ids))
    acc.update_data(
        {
            "tensor": torch.tensor(values, dtype=torch.float32)[:, None].repeat(1, 2),
            "array": np.asarray(values),
            "list": [str(v) for v in values],
        },
        indices=ids,
    )
    synced = acc.sync()
    storage = synced.storage
    record = {
        "num_samples": synced.num_samples,
        "is_full": synced.is_storage_full(),
        "indices": list(storage[INDICES_KEY]),
        "tensor": storage["tensor"].tolist(),
        "array": storage["array"].tolist(),
        "list": storage["list"],
    }

    metric = EmbeddingMetrics(
        RandomDataset(), cmc_top_k=(1, 3), map_top_k=(3,), fmr_vals=(0.2,), verbose=False
    )
    items = share(rank, world_size, N_ITEMS)
    metric.setup(num_samples=len(items) if rank % 2 == 0 else None)
    metric.update(embeddings()[items], torch.tensor(items))
    record["metrics"] = flatten_metrics(metric.compute_metrics())
    record["collected_after_compute"] = metric.acc.collected_samples
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(record))
    dist.destroy_process_group()


if __name__ == "__main__":
    world_size = int(sys.argv[2])
    # forked: each process has this one's imports (spawned, each would import torch and oml_core again)
    mp.start_processes(
        worker, args=(sys.argv[1], world_size), nprocs=world_size, join=True, start_method="fork"
    )

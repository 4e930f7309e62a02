"""One training step of ``ExtractorModule(gather_across_devices=True)`` on 2 CPU processes (gloo) under torch's
``DistributedDataParallel`` (as Lightning's DDP strategy runs ``training_step``), and write what every rank got
as JSON: the loss, every parameter's gradient after DDP averaged them, and the triplets the miner picked.

Usage: python ddp_gather.py OUT_DIR. Rank 0 gets the first ``SIZES[0]`` rows of :func:`batch`, rank 1 the rest
(batches of unequal size); rank 0 holds each label once, so every positive of its anchors is on rank 1.
"""

import json
import sys
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from oml_losses import ArcFaceLoss, TripletLossWithMiner
from oml_losses.miners import HardTripletsMiner
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from oml_core.interfaces.models import IExtractor
from oml_core.lightning.modules.extractor import ExtractorModule

SIZES = (4, 5)
N_FEATURES = 6
FEAT_DIM = 4
N_CLASSES = 4
CRITERIA = ("triplet_hard", "arcface")


class LinearExtractor(IExtractor):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(N_FEATURES, FEAT_DIM)

    @property
    def feat_dim(self) -> int:
        return FEAT_DIM

    def forward(self, x: Tensor) -> Tensor:
        return self.linear(x)


def batch() -> tuple[Tensor, Tensor]:
    """The global batch: inputs and labels of ``sum(SIZES)`` items."""
    inputs = torch.randn(sum(SIZES), N_FEATURES, generator=torch.Generator().manual_seed(1))
    return inputs, torch.tensor([0, 1, 2, 3, 0, 1, 2, 3, 0])


def models(criterion: str) -> tuple[LinearExtractor, nn.Module]:
    """The extractor and ``criterion``, with the same weights in every process."""
    torch.manual_seed(0)
    if criterion == "triplet_hard":
        return LinearExtractor(), TripletLossWithMiner(margin=0.2, miner=HardTripletsMiner())
    return LinearExtractor(), ArcFaceLoss(FEAT_DIM, N_CLASSES, s=8)


def record_triplets(criterion: nn.Module, record: dict) -> None:
    """Write the triplets ``criterion``'s in-batch miner picks into ``record["triplets"]`` (the miner runs)."""
    miner = getattr(criterion, "miner", None)
    if miner is None:
        return
    sample = miner._sample

    def recording(*args, **kwargs):
        ids = sample(*args, **kwargs)
        record["triplets"] = [[int(i) for i in part] for part in ids]
        return ids

    miner._sample = recording


class TrainingStep(nn.Module):
    """What Lightning's DDP wrapper does: the wrapped module's forward is its ``training_step``."""

    def __init__(self, module: ExtractorModule) -> None:
        super().__init__()
        self.module = module

    def forward(self, inputs: Tensor, labels: Tensor) -> Tensor:
        return self.module.training_step({"input_tensors": inputs, "labels": labels}, 0)


def worker(rank: int, out_dir: str) -> None:
    warnings.filterwarnings("ignore", message=".*self.log.*")  # the module runs outside a Trainer
    dist.init_process_group("gloo", init_method=f"file://{out_dir}/store", rank=rank, world_size=2)
    inputs, labels = batch()
    share = slice(0, SIZES[0]) if rank == 0 else slice(SIZES[0], None)
    records = {}
    for name in CRITERIA:
        extractor, criterion = models(name)
        record: dict = {}
        record_triplets(criterion, record)
        module = ExtractorModule(extractor, criterion, gather_across_devices=True)
        ddp = DistributedDataParallel(TrainingStep(module))  # kept: its reducer averages in backward()
        loss = ddp(inputs[share], labels[share])
        loss.backward()
        record["loss"] = loss.item()
        record["grads"] = {key: p.grad.tolist() for key, p in module.named_parameters()}
        records[name] = record
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(records))
    dist.destroy_process_group()


if __name__ == "__main__":
    # forked: each process has this one's imports (spawned, each would import torch and oml_core again)
    mp.start_processes(worker, args=(sys.argv[1],), nprocs=2, join=True, start_method="fork")

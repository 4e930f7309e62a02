"""DDP helpers: the sampler wrapper's split (checked by hand), loader patching, dict syncing, and one real
2-process gloo run compared with a single-process run."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler

from oml_core.ddp import (
    DDPSamplerWrapper,
    check_loaders_is_patched,
    gather_across_devices,
    merge_list_of_dicts,
    patch_dataloader_to_ddp,
    sync_dicts_ddp,
)
from oml_core.interfaces.samplers import IBatchSampler
from oml_core.lightning.modules.extractor import ExtractorModule
from tests.scripts.oml_forkserver import OmlForkServer

SCRIPT = Path(__file__).parent / "scripts" / "ddp_train.py"
GATHER_SCRIPT = Path(__file__).parent / "scripts" / "ddp_gather.py"


class FixedBatches(IBatchSampler):
    """Yields the same given batches every epoch."""

    def __init__(self, batches: list[list[int]]) -> None:
        self.batches = batches

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        return iter([list(batch) for batch in self.batches])


def test_every_batch_is_split_into_contiguous_parts_one_per_process():
    batches = [[10, 11, 12, 13, 14, 15], [20, 21, 22, 23, 24, 25]]
    rank0 = DDPSamplerWrapper(FixedBatches(batches), False, num_replicas=2, rank=0)
    rank1 = DDPSamplerWrapper(FixedBatches(batches), False, num_replicas=2, rank=1)
    assert list(rank0) == [[10, 11, 12], [20, 21, 22]]
    assert list(rank1) == [[13, 14, 15], [23, 24, 25]]
    assert len(rank0) == len(rank1) == 2


def test_a_batch_not_divisible_by_the_processes_is_padded_from_its_start_or_cut():
    batch = [[1, 2, 3, 4, 5]]
    padded = [
        list(DDPSamplerWrapper(FixedBatches(batch), False, True, num_replicas=3, rank=r)) for r in range(3)
    ]
    assert padded == [[[1, 2]], [[3, 4]], [[5, 1]]]
    cut = [
        list(DDPSamplerWrapper(FixedBatches(batch), False, False, num_replicas=2, rank=r)) for r in range(2)
    ]
    assert cut == [[[1, 2]], [[3, 4]]]
    with pytest.raises(ValueError, match="1 item\\(s\\) cannot be split among 2 processes without padding"):
        list(DDPSamplerWrapper(FixedBatches([[7]]), False, False, num_replicas=2, rank=0))


def test_a_torch_batch_sampler_is_split_too():
    sampler = BatchSampler(SequentialSampler(range(7)), batch_size=4, drop_last=False)
    parts = [list(DDPSamplerWrapper(sampler, False, num_replicas=2, rank=r)) for r in range(2)]
    assert parts == [[[0, 1], [4, 5]], [[2, 3], [6, 4]]]


def test_an_index_sampler_splits_the_epoch():
    parts = [
        list(DDPSamplerWrapper(SequentialSampler(range(5)), False, num_replicas=2, rank=r)) for r in range(2)
    ]
    assert parts == [[0, 1, 2], [3, 4, 0]]
    assert len(DDPSamplerWrapper(SequentialSampler(range(5)), False, num_replicas=2, rank=0)) == 3
    assert len(DDPSamplerWrapper(SequentialSampler(range(5)), False, False, num_replicas=2, rank=0)) == 2


def test_shuffling_is_the_same_permutation_in_every_process_and_changes_with_the_epoch():
    batches = [list(range(8))]

    def parts(epoch: int) -> list[list[int]]:
        wrappers = [
            DDPSamplerWrapper(FixedBatches(batches), True, num_replicas=2, rank=r, seed=3) for r in range(2)
        ]
        for wrapper in wrappers:
            wrapper.set_epoch(epoch)
        return [next(iter(wrapper)) for wrapper in wrappers]

    first = parts(0)
    expected = torch.randperm(8, generator=torch.Generator().manual_seed(3)).tolist()
    assert first == [expected[:4], expected[4:]]
    assert parts(0) == first
    assert parts(1) != first
    assert sorted(parts(1)[0] + parts(1)[1]) == list(range(8))


def test_rank_outside_the_world_is_refused():
    with pytest.raises(
        ValueError, match="rank must be in \\[0, num_replicas\\), got rank=2 and num_replicas=2"
    ):
        DDPSamplerWrapper(SequentialSampler(range(3)), num_replicas=2, rank=2)


def test_without_a_process_group_nothing_is_patched_or_synced():
    loader = DataLoader(list(range(10)), batch_size=4)
    assert patch_dataloader_to_ddp(loader) is loader
    assert not check_loaders_is_patched(loader)
    data = {"ids": [1, 2]}
    assert sync_dicts_ddp(data, world_size=2) is data
    wrapper = DDPSamplerWrapper(SequentialSampler(range(4)), False)
    assert (wrapper.num_replicas, wrapper.rank) == (1, 0)
    assert list(wrapper) == [0, 1, 2, 3]


@pytest.fixture()
def single_process_group(tmp_path):
    """A gloo process group of one process, so that the DDP code paths run in this process."""
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_patching_wraps_the_batch_sampler_and_keeps_the_loaders_settings(single_process_group):
    def collate(items: list[int]) -> list[int]:
        return items

    def make_loader() -> DataLoader:
        generator = torch.Generator().manual_seed(0)
        sampler = BatchSampler(RandomSampler(range(10), generator=generator), batch_size=4, drop_last=True)
        return DataLoader(list(range(10)), batch_sampler=sampler, collate_fn=collate, generator=generator)

    loader = make_loader()
    patched = patch_dataloader_to_ddp(loader)
    assert isinstance(patched.batch_sampler, DDPSamplerWrapper)
    assert patched.batch_sampler.sampler is loader.batch_sampler and not patched.batch_sampler.shuffle
    assert patched.collate_fn is collate and patched.generator is loader.generator
    assert check_loaders_is_patched([patched]) and check_loaders_is_patched({"a": patched})
    assert patch_dataloader_to_ddp(patched) is patched
    assert list(patched) == list(make_loader())  # a world of one process sees the batches unchanged
    with pytest.raises(ValueError, match="batch_size=None"):
        patch_dataloader_to_ddp(DataLoader(list(range(3)), batch_size=None))


def test_sync_in_a_group_of_one_merges_its_own_dict(single_process_group):
    merged = sync_dicts_ddp({"ids": (1, 2), "emb": torch.ones(2, 3)}, world_size=1)
    assert merged["ids"] == (1, 2) and torch.equal(merged["emb"], torch.ones(2, 3))
    with pytest.raises(ValueError, match="world_size=2, but the process group has 1 processes"):
        sync_dicts_ddp({"ids": [1]}, world_size=2)


def test_gathering_in_a_group_of_one_is_the_batch_itself(single_process_group):
    embeddings = torch.randn(3, 2, requires_grad=True)
    gathered, labels = gather_across_devices(embeddings, [4, 5, 4])
    assert gathered is embeddings and labels.tolist() == [4, 5, 4] and labels.dtype == torch.int64
    gathered.sum().backward()  # the gradient is the loss's own: DDP does not average over one process
    assert torch.equal(embeddings.grad, torch.ones(3, 2))
    with pytest.raises(
        ValueError, match="gather_across_devices: 3 embeddings but 2 labels in this process's batch"
    ):
        gather_across_devices(embeddings, torch.tensor([1, 2]))


def test_merge_list_of_dicts_concatenates_value_by_value():
    merged = merge_list_of_dicts(
        [
            {"a": [1, 2], "b": (3,), "t": torch.tensor([[1.0]]), "n": np.array([1])},
            {"a": [5], "b": (6, 7), "t": torch.tensor([[2.0]]), "n": np.array([2, 3])},
        ]
    )
    assert merged["a"] == [1, 2, 5] and merged["b"] == (3, 6, 7)
    assert torch.equal(merged["t"], torch.tensor([[1.0], [2.0]]))
    assert merged["n"].tolist() == [1, 2, 3]
    with pytest.raises(TypeError, match="the value of 'x' is a int"):
        merge_list_of_dicts([{"x": 1}])
    with pytest.raises(ValueError, match="dict 1 has the keys/types"):
        merge_list_of_dicts([{"a": [1]}, {"a": (1,)}])


def run_training(
    server: OmlForkServer, out: Path, cache_dir: Path, name: str, devices: int, max_epochs: int, *resume: str
) -> dict:
    """Run ``scripts/ddp_train.py`` in a process of its own (forked by ``server``; Lightning starts the other
    ranks as new interpreters); the records of its processes by rank."""
    env = {**os.environ, "OML_CACHE_DIR": str(cache_dir), "OMP_NUM_THREADS": "1"}
    done = server.run(
        [str(out), name, str(devices), str(max_epochs), *resume], env, timeout=240, script=SCRIPT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return {rank: json.loads((out / f"{name}_rank{rank}.json").read_text()) for rank in range(devices)}


def weights(checkpoint: str) -> dict[str, torch.Tensor]:
    return torch.load(checkpoint, weights_only=True)["state_dict"]


@pytest.fixture(scope="module")
def straight_runs(tmp_path_factory, oml_cache_dir, oml_fork_server) -> tuple[Path, dict, dict]:
    """The same 2-epoch run on 1 process and on 2: the output dir and the records of both."""
    out = tmp_path_factory.mktemp("ddp")
    return (
        out,
        run_training(oml_fork_server, out, oml_cache_dir, "single", 1, 2),
        run_training(oml_fork_server, out, oml_cache_dir, "ddp", 2, 2),
    )


@pytest.mark.slow
def test_two_processes_train_on_the_single_process_batches_and_get_its_metrics(straight_runs):
    """1 process x batches of 30 vs 2 processes x 15: every step the two processes train on the two halves
    of the single-process batch, and the weights and validation metrics come out the same."""
    out, single, ddp = straight_runs
    single, rank0, rank1 = single[0], ddp[0], ddp[1]
    assert len(single["steps"]) == len(rank0["steps"]) == len(rank1["steps"]) == 4  # 2 epochs x 16 // 6
    for whole, part0, part1 in zip(single["steps"], rank0["steps"], rank1["steps"]):
        assert len(whole) == 30 and len(part0) == len(part1) == 15
        assert part0 + part1 == whole
    assert rank0["steps_of_all_ranks"] == rank1["steps_of_all_ranks"] == rank0["steps"] + rank1["steps"]

    assert set(single["metrics"]) == {
        "OVERALL/cmc/1",
        "OVERALL/cmc/5",
        "OVERALL/precision/5",
        "OVERALL/map/5",
        "OVERALL/pcf/0.5",
    }
    assert rank0["metrics"] == pytest.approx(single["metrics"], abs=1e-6)
    assert rank1["metrics"] == rank0["metrics"]

    assert rank0["last_checkpoint"] == rank1["last_checkpoint"]  # one run directory for both processes
    # only the process of rank 0 reports (`oml train` prints the report where is_main_process)
    assert [record["is_main_process"] for record in (single, rank0, rank1)] == [True, True, False]
    single_weights = weights(single["last_checkpoint"])
    for key, value in weights(rank0["last_checkpoint"]).items():
        torch.testing.assert_close(value, single_weights[key], atol=1e-5, rtol=0)
    ddp_callbacks = torch.load(rank0["last_checkpoint"], weights_only=True)["callbacks"]
    assert len(ddp_callbacks["RNGStateCallback"]["per_process"]) == 2  # the random state of every process
    # gloo's group is destroyed before the interpreter finalises (else it may abort then, exit -6)
    for rank in (0, 1):
        assert json.loads((out / f"ddp_rank{rank}_exit.json").read_text()) == {"group_alive": False}


@pytest.mark.slow
def test_a_ddp_run_resumed_after_its_first_epoch_ends_as_the_uninterrupted_one(
    straight_runs, oml_cache_dir, oml_fork_server
):
    out, _, ddp = straight_runs
    killed = run_training(oml_fork_server, out, oml_cache_dir, "killed", 2, 1)
    resumed = run_training(oml_fork_server, out, oml_cache_dir, "resumed", 2, 2, killed[0]["last_checkpoint"])
    assert resumed[0]["steps"] + resumed[1]["steps"] == ddp[0]["steps"][2:] + ddp[1]["steps"][2:]  # epoch 2
    assert resumed[0]["metrics"] == resumed[1]["metrics"] == ddp[0]["metrics"]
    expected = weights(ddp[0]["last_checkpoint"])
    for key, value in weights(resumed[0]["last_checkpoint"]).items():
        assert torch.equal(value, expected[key]), key


def test_two_processes_gathering_their_batches_train_as_one_on_the_concatenated_batch(
    tmp_path, oml_fork_server
):
    """``gather_across_devices=True`` on 2 gloo processes with batches of 4 and 5 (``scripts/ddp_gather.py``): each
    process's loss, and its gradients after DDP's averaging, are those of one process on the 9 items (a triplet
    loss with a hard miner, and ArcFace, whose own weights get the gradient too); the miner picks its triplets
    from the global batch: rank 0 holds each label once, so its anchors' positives are rank 1's items."""
    sys.path.insert(0, str(GATHER_SCRIPT.parent))
    from ddp_gather import CRITERIA, SIZES, batch, models, record_triplets

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = oml_fork_server.run([str(tmp_path)], env, timeout=240, script=GATHER_SCRIPT)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(2)]
    inputs, labels = batch()
    for name in CRITERIA:
        extractor, criterion = models(name)
        expected: dict = {}
        record_triplets(criterion, expected)
        module = ExtractorModule(extractor, criterion)
        loss = criterion(extractor(inputs), labels)
        loss.backward()
        for record in (rank[name] for rank in ranks):
            assert record["loss"] == pytest.approx(loss.item(), abs=1e-6), name
            for key, parameter in module.named_parameters():
                torch.testing.assert_close(
                    torch.tensor(record["grads"][key]), parameter.grad, atol=1e-6, rtol=1e-5
                )
            assert record.get("triplets") == expected.get("triplets"), name
    anchors, positives, _ = ranks[0]["triplet_hard"]["triplets"]
    assert len(anchors) == sum(SIZES)  # every item of both processes is an anchor
    assert all(p >= SIZES[0] for a, p in zip(anchors, positives) if a < SIZES[0])  # positives from rank 1

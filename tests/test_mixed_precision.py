"""Mixed precision (``16-mixed`` / ``bf16-mixed``): losses, distances and metric embeddings stay float32.

Found on a GPU (H200, 2026-11-26): ``oml train precision=16-mixed`` (and ``bf16-mixed``) with the default triplet
loss stopped at its first batch holding two close embeddings: under autocast ``pairwise_l2``'s matrix multiply
gave 16 bits, its recomputed close pairs 32, and writing one into the other raised ``RuntimeError: Index put
requires the source and destination dtypes match``. CPU autocast makes the same mix, so these tests run the real
autocast of torch (and of Lightning's ``bf16-mixed`` trainer) on the CPU.
"""

from __future__ import annotations

import pytest
import pytorch_lightning as pl
import torch
from oml_losses import TripletLossWithMiner
from torch import Tensor, nn

from oml_core.interfaces.models import IExtractor
from oml_core.lightning.modules import ExtractorModule
from oml_core.utils.misc_torch import pairwise_l2
from oml_core.utils.precision import full_precision, to_full_precision

LOW = [torch.bfloat16, torch.float16]
# the Lightning run here trains without a validation loader, on purpose
pytestmark = pytest.mark.filterwarnings("ignore:You defined a `validation_step` but have no `val_dataloader`")


def features_with_a_duplicate() -> Tensor:
    """8 rows of 16 features whose rows 0 and 1 are equal (a close pair: recomputed directly)."""
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(0))
    x[1] = x[0]
    return x


@pytest.mark.parametrize("dtype", LOW)
def test_pairwise_l2_under_autocast_is_the_float32_result(dtype):
    x = features_with_a_duplicate().requires_grad_()
    expected = pairwise_l2(x)
    (expected_grad,) = torch.autograd.grad(expected.sum(), x)
    with torch.autocast("cpu", dtype=dtype):
        dist = pairwise_l2(x)
    (grad,) = torch.autograd.grad(dist.sum(), x)
    assert dist.dtype == torch.float32
    assert torch.equal(dist, expected)
    assert dist[0, 1] == 0 and dist[1, 0] == 0
    assert torch.equal(grad, expected_grad)


@pytest.mark.parametrize("dtype", LOW)
def test_pairwise_l2_of_16_bit_features_is_float32_with_a_16_bit_gradient(dtype):
    x = features_with_a_duplicate().to(dtype).requires_grad_()
    dist = pairwise_l2(x)
    assert dist.dtype == torch.float32
    assert torch.equal(dist, pairwise_l2(x.detach().float()))
    (grad,) = torch.autograd.grad(dist.sum(), x)
    assert grad.dtype == dtype


def test_float64_features_keep_float64():
    x = features_with_a_duplicate().double()
    assert pairwise_l2(x).dtype == torch.float64


def test_full_precision_switches_autocast_off_only_inside():
    a = torch.randn(4, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert (a @ a).dtype == torch.bfloat16
        with full_precision(a.device):
            assert (a @ a).dtype == torch.float32
        assert (a @ a).dtype == torch.bfloat16
    with full_precision("cpu"):  # autocast off: nothing to switch
        assert (a @ a).dtype == torch.float32
    assert to_full_precision(a.half()).dtype == torch.float32
    assert to_full_precision(a.double()).dtype == torch.float64


class Normalised(IExtractor):
    """A linear layer and L2 normalisation: under autocast its matrix multiply is 16-bit, its norm 32-bit."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(16, 16)
        with torch.no_grad():
            self.linear.weight.copy_(torch.eye(16))
            self.linear.bias.zero_()

    def forward(self, x: Tensor) -> Tensor:
        return nn.functional.normalize(self.linear(x), dim=1)

    @property
    def feat_dim(self) -> int:
        return 16


def test_a_bf16_mixed_lightning_run_trains_the_triplet_loss_on_a_batch_with_twins():
    """The fault itself: Lightning's bf16-mixed autocast, the triplet loss, two equal items in the batch."""
    x = features_with_a_duplicate()
    labels = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    losses: list[Tensor] = []

    class Recording(ExtractorModule):
        def training_step(self, batch, batch_idx):
            loss = super().training_step(batch, batch_idx)
            losses.append(loss.detach())
            return loss

    extractor = Normalised()
    module = Recording(
        extractor, TripletLossWithMiner(margin=0.2), torch.optim.SGD(extractor.parameters(), lr=0.0)
    )
    trainer = pl.Trainer(
        max_epochs=1,
        accelerator="cpu",
        precision="bf16-mixed",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    loader = torch.utils.data.DataLoader([{"input_tensors": x, "labels": labels}], batch_size=None)
    trainer.fit(module, train_dataloaders=loader)

    assert len(losses) == 1 and losses[0].dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        embeddings = extractor(x)  # the extractor runs in mixed precision, as in the run
    expected = TripletLossWithMiner(margin=0.2)(embeddings.float(), labels)
    assert torch.equal(losses[0], expected)


def test_validation_embeddings_are_float32_under_autocast():
    module = ExtractorModule(Normalised())
    batch = {"input_tensors": features_with_a_duplicate(), "idx": torch.arange(8)}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = module.validation_step(batch, 0)
    assert out["embeddings"].dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(out["embeddings"], Normalised().extract(batch["input_tensors"]).float())

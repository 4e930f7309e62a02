"""Reading checkpoint files in the core: torch files with weights_only, Lightning checkpoints, safetensors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from oml_core.utils.checkpoints import CheckpointError, read_state_dict


def test_torch_lightning_and_safetensors_files(tmp_path: Path) -> None:
    tensors = {"a.weight": torch.arange(6.0).view(2, 3), "a.bias": torch.tensor([1.0, -1.0])}
    torch.save(tensors, tmp_path / "plain.pth")
    torch.save({"state_dict": tensors, "epoch": 3}, tmp_path / "lightning.ckpt")
    save_file(tensors, str(tmp_path / "model.safetensors"))
    for name in ("plain.pth", "lightning.ckpt", "model.safetensors"):
        read = read_state_dict(tmp_path / name)
        assert read.keys() == tensors.keys(), name
        assert all(torch.equal(read[k], tensors[k]) for k in tensors), name


def test_unreadable_files_name_the_file(tmp_path: Path) -> None:
    (tmp_path / "broken.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointError, match=r"Cannot read the safetensors file '.*broken\.safetensors'"):
        read_state_dict(tmp_path / "broken.safetensors")
    torch.save([1, 2, 3], tmp_path / "list.pth")
    with pytest.raises(CheckpointError, match=r"'.*list\.pth' holds a list, not a state dict"):
        read_state_dict(tmp_path / "list.pth")
    with pytest.raises(FileNotFoundError, match="missing.pth"):
        read_state_dict(tmp_path / "missing.pth")

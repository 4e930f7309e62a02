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


def test_a_text_file_a_directory_and_a_link_loop_are_named_as_what_they_are(tmp_path: Path) -> None:
    (tmp_path / "notes.pth").write_text("epoch 101\n")
    (tmp_path / "loop.pth").symlink_to("loop.pth")
    (tmp_path / "folder.pth").mkdir()
    expected = {
        "notes.pth": f"'{tmp_path / 'notes.pth'}' is not a checkpoint written by torch.save (neither a zip archive "
        "nor a pickle): it begins with b'epoch 101\\n'",
        "loop.pth": f"the checkpoint '{tmp_path / 'loop.pth'}' is a symbolic link loop",
        "folder.pth": f"the checkpoint '{tmp_path / 'folder.pth'}' is a directory, not a file",
    }
    for name, message in expected.items():
        with pytest.raises(CheckpointError) as caught:
            read_state_dict(tmp_path / name)
        assert str(caught.value) == message
    tensors = {"w": torch.ones(2)}
    torch.save(tensors, tmp_path / "legacy.pth", _use_new_zipfile_serialization=False)  # a pickle, not a zip
    assert torch.equal(read_state_dict(tmp_path / "legacy.pth")["w"], tensors["w"])

"""Atomic writes: a full disk (a real small tmpfs, and an OSError injected into the write) or an error in the
middle of a write leaves the previous file whole under its name and no temporary file behind."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest
import torch

from oml_core.lightning.callbacks.checkpoint import AtomicCheckpointIO
from oml_core.utils.atomic import AtomicWriteError, atomic_write, atomic_write_bytes, temporary_path_for


def test_atomic_write_replaces_the_file_whole(tmp_path):
    path = tmp_path / "f.bin"
    atomic_write_bytes(path, b"old")
    atomic_write_bytes(path, b"new contents")
    assert path.read_bytes() == b"new contents"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]


def test_an_error_inside_the_block_keeps_the_previous_file_and_removes_the_temporary_one(tmp_path):
    path = tmp_path / "f.bin"
    atomic_write_bytes(path, b"old")
    with pytest.raises(ZeroDivisionError), atomic_write(path) as file:
        file.write(b"half of the new")
        assert temporary_path_for(path).exists()
        _ = 1 / 0
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]


def test_an_injected_enospc_is_one_line_naming_the_file_and_the_previous_file_is_intact(
    tmp_path, monkeypatch
):
    path = tmp_path / "last.ckpt"
    torch.save({"step": 1}, path)
    before = path.read_bytes()

    def full_disk(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(AtomicWriteError) as caught:
        AtomicCheckpointIO().save_checkpoint({"step": 2, "w": torch.ones(1000)}, path)
    assert (
        str(caught.value)
        == f"cannot write {str(path)!r}: No space left on device (the previous file is intact)"
    )
    assert caught.value.errno == errno.ENOSPC and "\n" not in str(caught.value)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.ckpt"]


def test_a_first_write_that_fails_says_that_no_file_was_written(tmp_path):
    path = tmp_path / "missing_dir" / "f.bin"
    with pytest.raises(AtomicWriteError, match=r"No such file or directory \(no file was written\)$"):
        atomic_write_bytes(path, b"x")


@pytest.fixture()
def small_tmpfs(tmp_path):
    """A real 1 MiB tmpfs (root can mount one here); the injected-OSError test above covers machines where
    mounting is not permitted."""
    mount_point = tmp_path / "tmpfs"
    mount_point.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)], capture_output=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount_point
    subprocess.run(["umount", str(mount_point)], check=True)


def test_a_full_tmpfs_keeps_the_previous_checkpoint_loadable(small_tmpfs):
    path = small_tmpfs / "last.ckpt"
    io = AtomicCheckpointIO()
    good = {"state_dict": {"w": torch.arange(10.0)}, "global_step": 3}
    io.save_checkpoint(good, path)
    with pytest.raises(AtomicWriteError, match="No space left on device"):
        io.save_checkpoint({"state_dict": {"w": torch.zeros(400_000)}, "global_step": 4}, path)  # 1.6 MB
    assert sorted(p.name for p in small_tmpfs.iterdir()) == ["last.ckpt"]
    loaded = torch.load(path, weights_only=True)
    assert loaded["global_step"] == 3 and torch.equal(loaded["state_dict"]["w"], torch.arange(10.0))


def test_the_checkpoint_io_refuses_storage_options(tmp_path):
    with pytest.raises(TypeError, match="storage_options"):
        AtomicCheckpointIO().save_checkpoint({}, tmp_path / "x.ckpt", storage_options={"a": 1})
    assert not (tmp_path / "x.ckpt").exists()


def test_checkpoints_are_written_where_asked_creating_the_directory(tmp_path):
    path = tmp_path / "a" / "b" / "c.ckpt"
    AtomicCheckpointIO().save_checkpoint({"x": torch.tensor([1, 2])}, Path(path))
    assert torch.equal(torch.load(path, weights_only=True)["x"], torch.tensor([1, 2]))

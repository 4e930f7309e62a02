"""Atomic writes: a full disk (a real small tmpfs, and an OSError injected into the write) or an error in the
middle of a write leaves the previous file whole under its name and no temporary file behind; a write killed
with SIGKILL leaves the previous file whole and verified, and its temporary file is removed by the next write in
that folder, never the file of a process that still runs."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from oml_core.lightning.callbacks.checkpoint import AtomicCheckpointIO
from oml_core.utils.atomic import (
    AtomicWriteError,
    atomic_write,
    atomic_write_bytes,
    remove_stale_temporaries,
    temporary_path_for,
)
from oml_core.utils.digest import DigestStatus, verify_checkpoint


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


#: A process that saves ``{"step": k, "w": a 64 MiB tensor of k}`` to ARGV[1] with ``atomic_torch_save``,
#: k = 1, 2, ... until it is killed: its writes take long enough that a kill lands in the middle of one.
WRITER = """
import sys
import torch
from oml_core.utils.atomic import atomic_torch_save
weights = torch.zeros(16 * 2**20)
step = 0
while True:
    step += 1
    weights.fill_(step)
    atomic_torch_save({"step": step, "w": weights}, sys.argv[1])
"""


def start_writer(path: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WRITER, str(path)])


def signal_in_the_middle_of_a_write(process: subprocess.Popen, path: Path, signum: int) -> Path:
    """Send ``signum`` to the writer ``process`` once its temporary file of ``path`` exists, has bytes and
    ``path`` has been written at least once; return the temporary file, which the signal left behind (retried
    when the write ended between the look and the signal)."""
    temporary = path.with_name(f".tmp-{path.name}.{process.pid}")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, "the writer died"
        if path.exists() and temporary.exists() and temporary.stat().st_size > 0:
            os.kill(process.pid, signum)
            if signum == signal.SIGKILL:
                process.wait()
            if temporary.exists():
                return temporary
            if signum != signal.SIGKILL:
                os.kill(process.pid, signal.SIGCONT)
                continue
            raise AssertionError("the write ended before the kill")  # the caller retries with a new writer
        time.sleep(0.001)
    raise AssertionError("the writer never wrote")


def kill_in_the_middle_of_a_write(path: Path) -> tuple[Path, int]:
    """SIGKILL a writer of ``path`` in the middle of a write; returns its temporary file and its pid."""
    for _ in range(5):
        process = start_writer(path)
        try:
            return signal_in_the_middle_of_a_write(process, path, signal.SIGKILL), process.pid
        except AssertionError as error:
            if "before the kill" not in str(error):
                raise
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    raise AssertionError("five kills all landed between two writes")


def test_a_write_killed_with_sigkill_leaves_the_previous_file_whole_and_the_next_start_removes_its_temporary(
    tmp_path,
):
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    last = checkpoints / "last.ckpt"
    # another process of the run, writing best.ckpt: it is stopped in the middle of a write below
    live = start_writer(checkpoints / "best.ckpt")
    try:
        stale, dead_pid = kill_in_the_middle_of_a_write(last)
        full_size = last.stat().st_size
        assert 0 < stale.stat().st_size < full_size  # cut in the middle
        assert verify_checkpoint(last) is DigestStatus.VERIFIED  # the previous file, whole
        previous = torch.load(last, weights_only=True)
        assert previous["step"] >= 1
        assert torch.equal(previous["w"], torch.full((16 * 2**20,), float(previous["step"])))

        live_temporary = signal_in_the_middle_of_a_write(live, checkpoints / "best.ckpt", signal.SIGSTOP)
        live_size = live_temporary.stat().st_size
        step_when_stopped = torch.load(checkpoints / "best.ckpt", weights_only=True)["step"]
        not_ours = [checkpoints / ".tmp-notes.txt", checkpoints / f".tmp-x.{dead_pid}.bak"]
        for path in not_ours:
            path.write_bytes(b"kept")
        index_folder = (
            checkpoints / f".tmp-folder.{dead_pid}"
        )  # a folder (a gallery index's), not a write's file
        index_folder.mkdir()

        # the next run starts in this folder: its first checkpoint removes what the killed write left
        AtomicCheckpointIO().save_checkpoint({"step": 0}, checkpoints / "epoch.ckpt")
        assert not stale.exists()
        assert live_temporary.stat().st_size >= live_size  # the live process's file is kept
        assert all(path.read_bytes() == b"kept" for path in not_ours)
        assert index_folder.is_dir()
        assert remove_stale_temporaries(checkpoints) == []
        assert verify_checkpoint(last) is DigestStatus.VERIFIED

        os.kill(live.pid, signal.SIGCONT)  # the stopped write goes on and ends in place
        deadline = time.monotonic() + 60
        while torch.load(checkpoints / "best.ckpt", weights_only=True)["step"] == step_when_stopped:
            assert time.monotonic() < deadline, "the stopped write never ended"
            time.sleep(0.05)
    finally:
        live.kill()
        live.wait()
    assert verify_checkpoint(checkpoints / "best.ckpt") is DigestStatus.VERIFIED


def test_stale_temporaries_are_removed_by_name_or_all_and_only_of_dead_processes(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead = int(done.stdout)  # a process that has ended (and been reaped)
    with pytest.raises(ProcessLookupError):
        os.kill(dead, 0)
    stale_last = tmp_path / f".tmp-last.ckpt.{dead}"
    stale_best = tmp_path / f".tmp-best.ckpt.{dead}"
    own = tmp_path / f".tmp-best.ckpt.{os.getpid()}"
    for path in (stale_last, stale_best, own):
        path.write_bytes(b"partial")

    atomic_write_bytes(tmp_path / "last.ckpt", b"new")  # a write removes the stale files of its own name only
    assert not stale_last.exists() and stale_best.exists() and own.exists()
    assert remove_stale_temporaries(tmp_path, "other.ckpt") == []
    assert remove_stale_temporaries(tmp_path) == [stale_best]
    assert own.exists() and (tmp_path / "last.ckpt").read_bytes() == b"new"
    assert remove_stale_temporaries(tmp_path / "missing") == []

"""The sha256 digest inside every torch file oml writes (``oml_core.utils.digest``): real files written by
``AtomicCheckpointIO`` / ``atomic_torch_save``, damaged on disk (4 KiB of random bytes in the middle, cut short,
the digest record itself changed), refused by every reader before use; foreign files still load."""

from __future__ import annotations

import hashlib
import io
import re
import zipfile
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from torch import nn

from oml_core.caches.embeddings import CACHE_MARKER, NotAnEmbeddingsCacheError, cached_embeddings
from oml_core.config.components import build_component
from oml_core.index.errors import GalleryIndexError
from oml_core.index.storage import EMBEDDINGS_FORMAT, read_embeddings
from oml_core.knn.exact import EXACT_EMBEDDINGS_FILE, EXACT_INDEX_FILE, ExactKnnIndex
from oml_core.lightning.callbacks.checkpoint import AtomicCheckpointIO
from oml_core.lightning.pipelines.shared.preflight import check_resume_checkpoint
from oml_core.registry import ConfigError, Registry
from oml_core.utils.atomic import atomic_torch_save
from oml_core.utils.checkpoints import CheckpointError, read_state_dict
from oml_core.utils.digest import (
    DIGEST_MAGIC,
    DIGEST_RECORD_SIZE,
    CorruptCheckpointError,
    DigestStatus,
    SealingWriter,
    is_verified_checkpoint,
    sealed_digest,
    verify_checkpoint,
)

MAGIC = b"oml-checkpoint-digest v1 sha256:"
DAMAGE_BYTES = 4096


def training_checkpoint(seed: int = 0) -> dict:
    """What Lightning saves, in small: a 2 MiB weight, so that the middle of the file is tensor data."""
    generator = torch.Generator().manual_seed(seed)
    return {
        "state_dict": {"model.w": torch.randn(512, 1024, generator=generator), "model.b": torch.zeros(3)},
        "optimizer_states": [{"state": {}, "param_groups": [{"lr": 0.1}]}],
        "loops": {"fit_loop": {"epoch_progress": {"current": 2}}},
        "epoch": 1,
        "global_step": 4,
    }


def damage_middle(path: Path, seed: int = 0) -> tuple[bytes, bytes]:
    """Overwrite :data:`DAMAGE_BYTES` bytes in the middle of ``path`` with seeded random bytes, as the user did;
    returns the bytes before and after."""
    before = path.read_bytes()
    noise = torch.randint(
        0, 256, (DAMAGE_BYTES,), generator=torch.Generator().manual_seed(seed), dtype=torch.uint8
    )
    middle = len(before) // 2
    after = before[:middle] + bytes(noise.tolist()) + before[middle + DAMAGE_BYTES :]
    assert len(after) == len(before) and after != before
    path.write_bytes(after)
    return before, after


def corrupt_message(path: Path, found: bytes, written: bytes) -> str:
    """The message expected for a file whose bytes ``found`` were written as ``written``: the digests of the
    bytes before the record, computed here with hashlib."""
    actual = hashlib.sha256(found[:-DIGEST_RECORD_SIZE]).hexdigest()
    expected = hashlib.sha256(written[:-DIGEST_RECORD_SIZE]).hexdigest()
    return (
        f"{path} is corrupt: its sha256 {actual[:16]}... differs from the one written with it ({expected[:16]}...); "
        f"it was changed or damaged after it was written"
    )


@pytest.fixture()
def last_ckpt(tmp_path: Path) -> Path:
    path = tmp_path / "checkpoints" / "last.ckpt"
    AtomicCheckpointIO().save_checkpoint(training_checkpoint(), path)
    return path


def sealed_at_once(data: bytes) -> bytes:
    """The sealed form of ``torch.save``'s output ``data``, computed from the whole (the module's formula)."""
    head = data[:-2] + DIGEST_RECORD_SIZE.to_bytes(2, "little")
    return head + MAGIC + hashlib.sha256(head).hexdigest().encode("ascii")


@pytest.mark.parametrize("chunking", ["torch", "bytes_of_1_to_40"])
def test_the_sealing_writer_writes_what_sealing_the_whole_output_gives(tmp_path, chunking):
    buffer = io.BytesIO()
    torch.save(training_checkpoint(), buffer)
    data = buffer.getvalue()
    target = tmp_path / "sealed.ckpt"
    with open(target, "wb") as file:
        writer = SealingWriter(file)
        if chunking == "torch":
            torch.save(training_checkpoint(), writer)
        else:  # writes shorter and longer than the held end record, as another writer could make them
            sizes = torch.randint(1, 41, (len(data),), generator=torch.Generator().manual_seed(0)).tolist()
            start = 0
            for size in sizes:
                if start >= len(data):
                    break
                assert writer.write(data[start : start + size]) == len(data[start : start + size])
                start += size
        writer.finish()
    assert target.read_bytes() == sealed_at_once(data)
    assert verify_checkpoint(target) is DigestStatus.VERIFIED
    assert torch.equal(
        torch.load(target, weights_only=True)["state_dict"]["model.w"],
        training_checkpoint()["state_dict"]["model.w"],
    )


def test_the_sealing_writer_refuses_what_is_not_torch_save_output(tmp_path):
    with open(tmp_path / "x.bin", "wb") as file:
        writer = SealingWriter(file)
        writer.write(b"not a zip archive at all, longer than 22 bytes")
        with pytest.raises(ValueError, match="does not end with the zip end record of torch.save"):
            writer.finish()


def test_the_digest_is_the_zip_comment_and_plain_torch_load_reads_the_file(last_ckpt: Path) -> None:
    data = last_ckpt.read_bytes()
    assert DIGEST_MAGIC == MAGIC and DIGEST_RECORD_SIZE == len(MAGIC) + 64 == 96
    # the record: the magic and the sha256 of every byte before it (the zip, its comment length 96 included)
    assert data[-96:] == MAGIC + hashlib.sha256(data[:-96]).hexdigest().encode()
    assert data[-96 - 22 : -96 - 18] == b"PK\x05\x06" and data[-98:-96] == (96).to_bytes(2, "little")
    with zipfile.ZipFile(last_ckpt) as archive:
        assert archive.comment == data[-96:] and archive.testzip() is None
    expected = training_checkpoint()
    for mmap in (False, True):
        loaded = torch.load(last_ckpt, weights_only=True, mmap=mmap)
        assert torch.equal(loaded["state_dict"]["model.w"], expected["state_dict"]["model.w"])
        assert loaded["loops"] == expected["loops"] and loaded["global_step"] == 4
    assert verify_checkpoint(last_ckpt) is DigestStatus.VERIFIED and is_verified_checkpoint(last_ckpt)
    assert check_resume_checkpoint(last_ckpt) is DigestStatus.VERIFIED
    assert torch.equal(read_state_dict(last_ckpt)["model.w"], expected["state_dict"]["model.w"])


def test_the_sealed_digest_is_read_from_the_record_without_hashing(tmp_path: Path) -> None:
    sealed, foreign, tiny = tmp_path / "sealed.pt", tmp_path / "foreign.pt", tmp_path / "tiny"
    atomic_torch_save({"x": torch.arange(10)}, sealed)
    data = sealed.read_bytes()
    assert sealed_digest(sealed) == hashlib.sha256(data[:-DIGEST_RECORD_SIZE]).hexdigest()
    torch.save({"x": torch.arange(10)}, foreign)
    tiny.write_bytes(b"PK")
    assert sealed_digest(foreign) is None and sealed_digest(tiny) is None
    damaged = bytearray(data)
    damaged[len(data) // 2] ^= 0xFF  # the body changed, the record kept: verify_checkpoint's to tell
    sealed.write_bytes(bytes(damaged))
    assert sealed_digest(sealed) == hashlib.sha256(data[:-DIGEST_RECORD_SIZE]).hexdigest()
    with pytest.raises(CorruptCheckpointError):
        verify_checkpoint(sealed)


def test_a_foreign_checkpoint_loads_as_before_and_is_never_called_verified(tmp_path: Path) -> None:
    state_dict = {"fc.weight": torch.arange(6.0).view(2, 3), "fc.bias": torch.tensor([1.0, -1.0])}
    weights = tmp_path / "weights.pth"
    torch.save(state_dict, weights)
    assert verify_checkpoint(weights) is DigestStatus.UNVERIFIED and not is_verified_checkpoint(weights)
    read = read_state_dict(weights)
    assert read.keys() == state_dict.keys() and all(torch.equal(read[k], v) for k, v in state_dict.items())
    foreign_training = tmp_path / "other.ckpt"
    torch.save(training_checkpoint(), foreign_training)
    assert check_resume_checkpoint(foreign_training) is DigestStatus.UNVERIFIED
    assert AtomicCheckpointIO().load_checkpoint(foreign_training)["global_step"] == 4
    not_a_zip = tmp_path / "notes.txt"
    not_a_zip.write_bytes(b"x" * 500)
    assert verify_checkpoint(not_a_zip) is DigestStatus.UNVERIFIED
    assert not is_verified_checkpoint(tmp_path / "missing.ckpt")


def test_4_kib_of_random_bytes_in_the_middle_are_refused_by_every_reader(last_ckpt: Path) -> None:
    written, found = damage_middle(last_ckpt)
    # the fault: torch checks no checksum, the damaged weights load without a word
    silently = torch.load(last_ckpt, weights_only=True)
    assert not torch.equal(silently["state_dict"]["model.w"], training_checkpoint()["state_dict"]["model.w"])

    message = corrupt_message(last_ckpt, found, written)
    with pytest.raises(CorruptCheckpointError) as caught:
        verify_checkpoint(last_ckpt)
    assert str(caught.value) == message and caught.value.path == last_ckpt
    assert not is_verified_checkpoint(last_ckpt)
    with pytest.raises(ConfigError) as caught:
        check_resume_checkpoint(last_ckpt)
    assert str(caught.value) == f"resume: {message}"
    with pytest.raises(CheckpointError) as caught:
        read_state_dict(last_ckpt)
    assert str(caught.value) == message
    with pytest.raises(CorruptCheckpointError) as caught:
        AtomicCheckpointIO().load_checkpoint(last_ckpt)
    assert str(caught.value) == message
    assert last_ckpt.read_bytes() == found  # nothing wrote over it


def test_extractor_weights_that_are_damaged_are_one_line_naming_the_config_key(tmp_path: Path) -> None:
    """``extractor.args.weights=best.ckpt`` of validate / predict / index build goes through the registry."""
    best = tmp_path / "best.ckpt"
    atomic_torch_save(training_checkpoint(), best)
    written, found = damage_middle(best, seed=1)
    spec = {
        "name": "resnet",
        "args": {
            "arch": "resnet18",
            "weights": str(best),
            "gem_p": None,
            "remove_fc": True,
            "normalise_features": False,
        },
    }
    with pytest.raises(ConfigError) as caught:
        build_component(Registry(), "extractor", spec, "extractor", "extractor_validation_pipeline")
    assert str(caught.value) == (
        f"extractor_validation_pipeline: config key 'extractor' ('resnet'): {corrupt_message(best, found, written)}"
    )


@pytest.mark.parametrize("cut", [1, DIGEST_RECORD_SIZE, DIGEST_RECORD_SIZE + 200, "half"])
def test_a_truncated_checkpoint_is_refused(last_ckpt: Path, cut: int | str) -> None:
    data = last_ckpt.read_bytes()
    keep = len(data) // 2 if cut == "half" else len(data) - int(cut)
    last_ckpt.write_bytes(data[:keep])
    if keep >= len(data) - DIGEST_RECORD_SIZE:  # the zip end record is there, its digest record cut short
        with pytest.raises(
            CorruptCheckpointError, match=r"its digest record \(the last 96 bytes\) is damaged"
        ):
            verify_checkpoint(last_ckpt)
        expected_resume = re.escape(f"resume: {last_ckpt} is corrupt: its digest record")
    else:  # the zip's end is gone: no digest to find, and torch's reader refuses the file
        assert verify_checkpoint(last_ckpt) is DigestStatus.UNVERIFIED
        expected_resume = re.escape(f"resume: cannot read the checkpoint {str(last_ckpt)!r}: RuntimeError: ")
    assert not is_verified_checkpoint(last_ckpt)
    with pytest.raises(ConfigError, match=f"^{expected_resume}") as caught:
        check_resume_checkpoint(last_ckpt)
    assert "\n" not in str(caught.value)
    with pytest.raises(CheckpointError, match=re.escape(str(last_ckpt))):
        read_state_dict(last_ckpt)
    with pytest.raises((CorruptCheckpointError, RuntimeError)):
        AtomicCheckpointIO().load_checkpoint(last_ckpt)


@pytest.mark.parametrize("damage", ["digit", "magic", "comment_length"])
def test_a_damaged_digest_record_is_refused(last_ckpt: Path, damage: str) -> None:
    data = bytearray(last_ckpt.read_bytes())
    written = bytes(data)
    if damage == "digit":  # one hex digit of the recorded digest: still hex, another digest
        data[-1] = ord("0") if data[-1] != ord("0") else ord("1")
    elif damage == "magic":
        data[-96:-90] = b"XXXXXX"
    else:  # the zip's comment length (hashed with the rest): the record becomes bytes after the zip's end
        data[-98:-96] = b"\0\0"
    last_ckpt.write_bytes(bytes(data))
    with pytest.raises(CorruptCheckpointError) as caught:
        verify_checkpoint(last_ckpt)
    if damage == "magic":
        assert str(caught.value) == (
            f"{last_ckpt} is corrupt: its digest record (the last 96 bytes) is damaged or cut short; it was "
            f"changed or damaged after it was written"
        )
    elif damage == "digit":  # the file's bytes are whole; the record says otherwise
        actual = hashlib.sha256(written[:-96]).hexdigest()
        assert str(caught.value).startswith(f"{last_ckpt} is corrupt: its sha256 {actual[:16]}... differs")
    else:
        assert str(caught.value) == corrupt_message(last_ckpt, bytes(data), written)
    with pytest.raises(ConfigError, match=f"^{re.escape(f'resume: {last_ckpt} is corrupt: ')}"):
        check_resume_checkpoint(last_ckpt)
    with pytest.raises(CheckpointError, match="is corrupt"):
        read_state_dict(last_ckpt)


class _Linear(pl.LightningModule):
    """A 2 MiB layer, so that the middle of its checkpoint is tensor data."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(1024, 512)

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        return self.layer(batch).pow(2).mean()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _trainer(root: Path, max_steps: int) -> pl.Trainer:
    return pl.Trainer(
        plugins=[AtomicCheckpointIO()],
        max_steps=max_steps,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(root),
    )


def test_lightning_refuses_to_resume_from_a_damaged_checkpoint_before_restoring_anything(
    tmp_path: Path,
) -> None:
    data = torch.randn(8, 1024, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    trainer = _trainer(tmp_path, max_steps=2)
    trainer.fit(_Linear(), torch.utils.data.DataLoader(data, batch_size=4))
    path = tmp_path / "last.ckpt"
    trainer.save_checkpoint(path)
    assert verify_checkpoint(path) is DigestStatus.VERIFIED
    assert _trainer(tmp_path, max_steps=2).strategy.checkpoint_io.load_checkpoint(path)["global_step"] == 2

    damage_middle(path)
    fresh = _Linear()
    before = {k: v.clone() for k, v in fresh.state_dict().items()}
    resumed = _trainer(tmp_path, max_steps=4)
    with pytest.raises(CorruptCheckpointError, match=f"^{re.escape(str(path))} is corrupt: its sha256"):
        resumed.fit(fresh, torch.utils.data.DataLoader(data, batch_size=4), ckpt_path=path, weights_only=True)
    assert resumed.global_step == 0
    assert all(torch.equal(fresh.state_dict()[k], v) for k, v in before.items())


def test_oml_train_resume_from_a_damaged_checkpoint_is_one_line_before_any_work(
    last_ckpt: Path, run_oml
) -> None:
    written, found = damage_middle(last_ckpt)
    logs = last_ckpt.parent.parent / "logs"
    done = run_oml("train", f"resume={last_ckpt}", f"logs_root={logs}")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"oml train: error: resume: {corrupt_message(last_ckpt, found, written)}"
    ]
    assert not logs.exists()
    assert last_ckpt.read_bytes() == found


def test_a_damaged_embeddings_cache_is_refused_or_computed_again(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "embeddings.pt"
    embeddings = torch.randn(4096, 128, generator=torch.Generator().manual_seed(0))
    cached_embeddings(path, "key", len(embeddings), lambda: embeddings)
    assert verify_checkpoint(path) is DigestStatus.VERIFIED
    assert torch.load(path, weights_only=True)["format"] == CACHE_MARKER
    written, found = damage_middle(path)

    def must_not_run() -> torch.Tensor:
        raise AssertionError("the damaged file is refused before anything is computed")

    with pytest.raises(NotAnEmbeddingsCacheError) as caught:
        cached_embeddings(path, "key", len(embeddings), must_not_run)
    assert str(caught.value) == (
        f"{corrupt_message(path, found, written)}; it was left untouched: delete it if it is a damaged cache, or "
        f"choose another cache path"
    )
    assert path.read_bytes() == found

    with pytest.warns(
        UserWarning, match=re.escape(f"{path}: unreadable embeddings cache (CorruptCheckpointError: ")
    ):
        again = cached_embeddings(path, "key", len(embeddings), lambda: embeddings * 1, replace_foreign=True)
    assert torch.equal(again, embeddings)
    assert verify_checkpoint(path) is DigestStatus.VERIFIED
    assert torch.equal(cached_embeddings(path, "key", len(embeddings), must_not_run), embeddings)


def test_damaged_index_files_are_refused_naming_the_file(tmp_path: Path) -> None:
    embeddings = torch.randn(2048, 64, generator=torch.Generator().manual_seed(0))
    stored = tmp_path / "embeddings.pt"
    atomic_torch_save({"format": EMBEDDINGS_FORMAT, "version": 2, "embeddings": embeddings}, stored)
    written, found = damage_middle(stored)
    with pytest.raises(GalleryIndexError) as caught:
        read_embeddings(stored, 2048, 64)
    assert str(caught.value) == corrupt_message(stored, found, written)

    backend = ExactKnnIndex("l2")
    backend.add(embeddings)
    backend.save(tmp_path / "backend")
    assert torch.equal(ExactKnnIndex.load(tmp_path / "backend").embeddings, embeddings)
    for name in (EXACT_EMBEDDINGS_FILE, EXACT_INDEX_FILE):  # the memory-mapped embeddings, then the state
        exact_file = tmp_path / "backend" / name
        damage_middle(exact_file)
        with pytest.raises(
            CorruptCheckpointError, match=f"^{re.escape(str(exact_file))} is corrupt: its sha256"
        ):
            ExactKnnIndex.load(tmp_path / "backend")

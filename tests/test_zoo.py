"""The pretrained zoo of the core: registration, download to the cache (file:// urls: no network), md5,
the check of cached files (hashed once, remembered in a sidecar), offline errors, conversion,
``ZooExtractor.from_pretrained`` and OML's own ``IExtractor.from_pretrained``, which knows no zoo."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import time
from functools import partial
from pathlib import Path

import pytest
import torch
from PIL import Image
from torch import nn

import oml_core.caches.digests as digests
import oml_core.registry
import oml_core.zoo.store as store
from oml_core import hookimpl
from oml_core.caches.digests import digests_sidecar
from oml_core.interfaces.models import IExtractor
from oml_core.registry import Registry, UnknownNameError
from oml_core.utils.checkpoints import CheckpointError
from oml_core.utils.images import imread_pil
from oml_core.zoo import (
    PretrainedChecksumError,
    PretrainedDownloadError,
    PretrainedModel,
    download_checkpoint,
    get_pretrained,
    get_transforms_for_pretrained,
    pretrained_checkpoint,
    pretrained_keys,
    weights_cache_dir,
)
from oml_core.zoo.extractor import ZooExtractor
from oml_core.zoo.store import check_cached_checkpoint


class TinyExtractor(ZooExtractor):
    def __init__(self, weights: str | None, dim: int = 3, scale: float = 1.0) -> None:
        super().__init__()
        self.linear = nn.Linear(4, dim)
        self.scale = scale
        if weights is not None:  # a zoo key given to the constructor: the plugin's own business
            raise AssertionError("from_pretrained must build with weights=None and then load")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.scale

    @property
    def feat_dim(self) -> int:
        return self.linear.out_features


class OtherExtractor(TinyExtractor):
    pass


def upstream_to_tiny(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The "upstream" files hold ``w`` and ``b``; the extractor names them ``linear.weight/bias``."""
    return {"linear.weight": state_dict["w"], "linear.bias": state_dict["b"]}


def write_upstream(path: Path, seed: int = 0, dim: int = 3) -> tuple[dict[str, torch.Tensor], str]:
    generator = torch.Generator().manual_seed(seed)
    tensors = {"w": torch.randn(dim, 4, generator=generator), "b": torch.randn(dim, generator=generator)}
    torch.save(tensors, path)
    return tensors, hashlib.md5(path.read_bytes()).hexdigest()


def make_registry(remote: Path, md5: str | None, url: str | None = None) -> Registry:
    entry = partial(
        PretrainedModel,
        extractor="tiny",
        init_args={"dim": 3, "scale": 2.0},
        url=url or remote.as_uri(),
        md5=md5,
        filename="tiny_v1.pth",
        transforms={"name": "norm_resize", "args": {"im_size": 8}},
        converter=f"{__name__}:upstream_to_tiny",
    )

    class Zoo:
        @hookimpl
        def oml_register_extractors(self, register):
            register("tiny", TinyExtractor)
            register("other", OtherExtractor)

        @hookimpl
        def oml_register_pretrained(self, register):
            register("tiny_v1", entry, description="a tiny test checkpoint")
            register("other_v1", partial(entry, extractor="other", filename="other_v1.pth"))

    return Registry([Zoo()], load_entrypoints=False)


@pytest.fixture()
def weights_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "weights"
    monkeypatch.setenv("OML_WEIGHTS_DIR", str(folder))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # file:// urls stand for the network here
    monkeypatch.delenv("OML_OFFLINE", raising=False)
    return folder


def test_download_once_then_from_the_cache_without_network(
    weights_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = tmp_path / "remote.pth"
    tensors, md5 = write_upstream(remote)
    registry = make_registry(remote, md5)
    path = pretrained_checkpoint("tiny_v1", registry)
    assert path == weights_dir / "tiny_v1.pth" and path.read_bytes() == remote.read_bytes()
    # no temporary file left; the digests checked after the download are remembered next to the file
    assert sorted(p.name for p in weights_dir.iterdir()) == ["tiny_v1.pth", "tiny_v1.pth.digests.json"]

    remote.unlink()  # the "server" is gone, and so is the network: the cache is enough

    def no_network(*args, **kwargs):
        raise AssertionError("a socket was opened")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr("urllib.request.urlopen", no_network)
    model = TinyExtractor.from_pretrained("tiny_v1", registry=registry)
    assert isinstance(model, TinyExtractor) and model.scale == 2.0  # init_args of the zoo
    torch.testing.assert_close(model.linear.weight, tensors["w"])
    x = torch.randn(5, 4)
    torch.testing.assert_close(model(x), 2.0 * (x @ tensors["w"].T + tensors["b"]))
    assert TinyExtractor.from_pretrained("tiny_v1", registry=registry, scale=3.0).scale == 3.0  # kwargs win


def test_an_md5_prefix_as_oml_keeps_them_is_checked(weights_dir: Path, tmp_path: Path) -> None:
    remote = tmp_path / "remote.pth"
    _, md5 = write_upstream(remote)
    assert pretrained_checkpoint("tiny_v1", make_registry(remote, md5[:8])).is_file()
    (weights_dir / "tiny_v1.pth").unlink()
    wrong = ("0" if md5[0] != "0" else "1") + md5[1:8]
    with pytest.raises(PretrainedDownloadError, match=f"expected {wrong}"):
        pretrained_checkpoint("tiny_v1", make_registry(remote, wrong))


def test_a_sha256_prefix_is_checked_too(weights_dir: Path, tmp_path: Path) -> None:
    remote = tmp_path / "remote.pth"
    write_upstream(remote)
    sha256 = hashlib.sha256(remote.read_bytes()).hexdigest()
    registry = make_registry(remote, None)
    entry = get_pretrained("tiny_v1", registry)
    assert download_checkpoint(entry.url, weights_dir / "a.pth", sha256=sha256[:12]).is_file()
    wrong = ("0" if sha256[0] != "0" else "1") + sha256[1:12]
    with pytest.raises(PretrainedDownloadError, match=f"has sha256 {sha256}, expected {wrong}"):
        download_checkpoint(entry.url, weights_dir / "b.pth", sha256=wrong)
    assert not (weights_dir / "b.pth").exists()


def test_a_wrong_md5_is_rejected_and_nothing_is_kept(weights_dir: Path, tmp_path: Path) -> None:
    remote = tmp_path / "remote.pth"
    write_upstream(remote)
    registry = make_registry(remote, "0" * 32)
    with pytest.raises(
        PretrainedDownloadError, match=r"has md5 [0-9a-f]{32}, expected 0{32}.*put the file at"
    ):
        pretrained_checkpoint("tiny_v1", registry)
    assert not weights_dir.exists() or list(weights_dir.iterdir()) == []


def test_offline_errors_say_what_to_download_and_where(
    weights_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = tmp_path / "remote.pth"
    _, md5 = write_upstream(remote)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    expected = rf"download {remote.as_uri()} yourself and put the file at {weights_dir / 'tiny_v1.pth'}"
    with pytest.raises(PretrainedDownloadError, match=r"downloads are disabled .*" + expected):
        pretrained_checkpoint("tiny_v1", make_registry(remote, md5))
    monkeypatch.delenv("HF_HUB_OFFLINE")
    closed_port = "http://127.0.0.1:9/tiny_v1.pth"  # nothing listens there: refused at once
    start = time.perf_counter()
    with pytest.raises(
        PretrainedDownloadError, match=r"cannot download .*http://127\.0\.0\.1:9/tiny_v1\.pth"
    ):
        pretrained_checkpoint("tiny_v1", make_registry(remote, md5, url=closed_port))
    assert time.perf_counter() - start < 10


def test_a_file_put_in_the_cache_by_hand_is_used(weights_dir: Path, tmp_path: Path) -> None:
    weights_dir.mkdir()
    tensors, _ = write_upstream(weights_dir / "tiny_v1.pth", seed=5)
    registry = make_registry(tmp_path / "never_there.pth", None)
    model = ZooExtractor.from_pretrained("tiny_v1", registry=registry)  # builds the key's own class
    assert type(model) is TinyExtractor
    torch.testing.assert_close(model.linear.bias, tensors["b"])


def test_lookups_and_errors(weights_dir: Path, tmp_path: Path) -> None:
    registry = make_registry(tmp_path / "remote.pth", None)
    assert pretrained_keys(registry=registry) == ["other_v1", "tiny_v1"]
    assert pretrained_keys("other", registry=registry) == ["other_v1"]
    assert get_pretrained("tiny_v1", registry).filename == "tiny_v1.pth"
    assert registry.describe("pretrained", "tiny_v1")["description"] == "a tiny test checkpoint"
    with pytest.raises(UnknownNameError, match="tiny_v2"):
        get_pretrained("tiny_v2", registry)
    with pytest.raises(
        TypeError, match=r"'tiny_v1' is for the extractor 'tiny' \(TinyExtractor\), not for Other"
    ):
        OtherExtractor.from_pretrained("tiny_v1", registry=registry)
    assert weights_cache_dir() == weights_dir


def test_a_checkpoint_that_does_not_fit_names_the_key(weights_dir: Path, tmp_path: Path) -> None:
    weights_dir.mkdir()
    write_upstream(weights_dir / "tiny_v1.pth", dim=5)  # 5 outputs, the zoo says 3
    with pytest.raises(CheckpointError, match=r"'tiny_v1' does not match TinyExtractor: shape mismatch"):
        TinyExtractor.from_pretrained("tiny_v1", registry=make_registry(tmp_path / "x.pth", None))


def test_transforms_for_pretrained(tmp_path: Path) -> None:
    transform, imread = get_transforms_for_pretrained("tiny_v1", make_registry(tmp_path / "x.pth", None))
    assert imread is imread_pil
    assert transform(Image.new("RGB", (20, 10))).shape == (3, 8, 8)


def test_pretrained_models_is_a_view_of_the_default_zoo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = make_registry(tmp_path / "x.pth", None)
    monkeypatch.setattr(oml_core.registry, "default_registry", lambda: registry)
    assert list(TinyExtractor.pretrained_models) == [
        "other_v1",
        "tiny_v1",
    ]  # OtherExtractor is a TinyExtractor
    assert list(OtherExtractor.pretrained_models) == ["other_v1"]


class OwnCheckpoints(IExtractor):
    """A user's extractor listing its checkpoints in its own dictionary, in OML's format (no zoo)."""

    pretrained_models = {
        "own_v1": {"init_args": {"dim": 2}, "url": "https://example.com/own_v1.pth", "hash": "0123ab"},
        "own_v2": {"init_args": {"dim": 5, "scale": 0.5}, "url": "https://example.com/own_v2.pth"},
    }

    def __init__(self, weights: str | None, dim: int = 3, scale: float = 1.0) -> None:
        super().__init__()
        self.weights = weights  # loading them is the constructor's business, as in OML
        self.linear = nn.Linear(4, dim)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.scale

    @property
    def feat_dim(self) -> int:
        return self.linear.out_features


def test_the_interface_builds_from_the_classs_own_dictionary_as_oml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_registry() -> Registry:
        raise AssertionError("the interface looked the zoo up")

    monkeypatch.setattr(oml_core.registry, "default_registry", no_registry)
    model = OwnCheckpoints.from_pretrained("own_v1", scale=3.0)  # cls(weights=key, **init_args, **kwargs)
    assert (model.weights, model.feat_dim, model.scale) == ("own_v1", 2, 3.0)
    model = OwnCheckpoints.from_pretrained("own_v2")
    assert (model.weights, model.feat_dim, model.scale) == ("own_v2", 5, 0.5)
    with pytest.raises(
        KeyError,
        match=r"There is no pretrained model own_v3\. The existing ones are \['own_v1', 'own_v2'\]\.",
    ):
        OwnCheckpoints.from_pretrained("own_v3")
    with pytest.raises(TypeError, match="multiple values for keyword argument 'dim'"):
        OwnCheckpoints.from_pretrained("own_v1", dim=7)  # as OML's: kwargs add to init_args, never replace
    # OML's IExtractor lists no checkpoint; the zoo's are built by the zoo's extractors, as the message says
    monkeypatch.setattr(
        oml_core.registry, "default_registry", lambda: make_registry(tmp_path / "x.pth", None)
    )
    with pytest.raises(
        KeyError, match=r"tiny_v1\. The existing ones are \[\]\..*ZooExtractor\.from_pretrained"
    ):
        IExtractor.from_pretrained("tiny_v1")
    assert IExtractor.pretrained_models == {} and list(ZooExtractor.pretrained_models) == [
        "other_v1",
        "tiny_v1",
    ]


def test_bad_entries_are_rejected() -> None:
    args = {
        "extractor": "tiny",
        "url": "file:///x",
        "filename": "x.pth",
        "transforms": {"name": "norm_resize"},
    }
    with pytest.raises(ValueError, match="init_args must not hold 'weights'"):
        PretrainedModel(init_args={"weights": "x"}, md5=None, **args)
    with pytest.raises(ValueError, match="md5 must be 6 to 32 lowercase hex digits"):
        PretrainedModel(init_args={}, md5="ABCDEF01", **args)
    with pytest.raises(ValueError, match="md5 must be 6 to 32 lowercase hex digits"):
        PretrainedModel(init_args={}, md5="abc", **args)
    with pytest.raises(ValueError, match="sha256 must be 6 to 64 lowercase hex digits"):
        PretrainedModel(init_args={}, md5=None, sha256="f" * 65, **args)
    with pytest.raises(ValueError, match="imread must be one of"):
        PretrainedModel(init_args={}, md5=None, imread="cv2", **args)


# ------------------------------------------------------------------- the digests of cached checkpoints
@pytest.fixture()
def hashing(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files hashed by the zoo (every call of ``file_digests``: by its downloads, and by the digests it
    remembers in :mod:`oml_core.caches.digests`), in order."""
    calls: list[Path] = []
    original = digests.file_digests

    def counted(path: Path) -> dict[str, str]:
        calls.append(Path(path))
        return original(path)

    monkeypatch.setattr(store, "file_digests", counted)
    monkeypatch.setattr(digests, "file_digests", counted)
    return calls


def test_a_cached_file_is_hashed_once_and_its_digests_remembered(
    weights_dir: Path, tmp_path: Path, hashing: list[Path]
) -> None:
    weights_dir.mkdir()
    path = weights_dir / "tiny_v1.pth"
    tensors, md5 = write_upstream(path, seed=2)  # put there by hand: never checked yet
    registry = make_registry(tmp_path / "never_there.pth", md5)
    assert pretrained_checkpoint("tiny_v1", registry) == path
    assert hashing == [path]
    sidecar = digests_sidecar(path)
    assert sidecar == weights_dir / "tiny_v1.pth.digests.json"
    record = json.loads(sidecar.read_text())
    assert record["file"] == "tiny_v1.pth" and record["size"] == path.stat().st_size
    assert record["mtime_ns"] == path.stat().st_mtime_ns
    assert record["md5"] == md5 and record["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    # the next uses take the digests from the sidecar: no hashing
    assert pretrained_checkpoint("tiny_v1", registry) == path
    model = TinyExtractor.from_pretrained("tiny_v1", registry=registry)
    torch.testing.assert_close(model.linear.weight, tensors["w"])
    assert hashing == [path]
    assert sorted(p.name for p in weights_dir.iterdir()) == ["tiny_v1.pth", "tiny_v1.pth.digests.json"]


def test_a_downloaded_file_is_not_hashed_again(
    weights_dir: Path, tmp_path: Path, hashing: list[Path]
) -> None:
    remote = tmp_path / "remote.pth"
    _, md5 = write_upstream(remote)
    registry = make_registry(remote, md5)
    path = pretrained_checkpoint("tiny_v1", registry)
    assert len(hashing) == 1 and hashing[0].name.endswith(".part")  # the download, before its rename
    assert json.loads(digests_sidecar(path).read_text())["md5"] == md5
    for _ in range(2):
        assert pretrained_checkpoint("tiny_v1", registry) == path
    assert len(hashing) == 1


def _rewrite_keeping_size_and_mtime(path: Path) -> None:
    """Change one byte of ``path`` in place and put its modification time back (size, mtime, inode kept)."""
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    time.sleep(0.01)
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)


@pytest.mark.parametrize("change", ["rewrite", "same size and mtime"])
def test_a_file_changed_after_its_check_is_checked_again_and_refused(
    weights_dir: Path, tmp_path: Path, hashing: list[Path], change: str
) -> None:
    weights_dir.mkdir()
    path = weights_dir / "tiny_v1.pth"
    _, md5 = write_upstream(path, seed=3)
    registry = make_registry(tmp_path / "remote.pth", md5)
    pretrained_checkpoint("tiny_v1", registry)
    assert hashing == [path]
    if change == "rewrite":
        write_upstream(path, seed=4, dim=4)  # another checkpoint under the same name
    else:
        _rewrite_keeping_size_and_mtime(path)  # its change time and content differ only
    actual = hashlib.md5(path.read_bytes()).hexdigest()
    assert actual != md5
    with pytest.raises(PretrainedChecksumError) as info:
        pretrained_checkpoint("tiny_v1", registry)
    assert hashing == [path, path]  # hashed again
    message = str(info.value)
    assert f"the cached checkpoint {path} has md5 {actual}, expected {md5}" in message
    assert f"delete it to download it again from {(tmp_path / 'remote.pth').as_uri()}" in message
    assert isinstance(info.value, PretrainedDownloadError)  # the zoo's error type, as a download's


def test_a_wrong_file_is_refused_every_time_and_hashed_once(
    weights_dir: Path, tmp_path: Path, hashing: list[Path]
) -> None:
    weights_dir.mkdir()
    path = weights_dir / "tiny_v1.pth"
    path.write_bytes(b"not a checkpoint")  # a truncated or foreign file
    actual = hashlib.md5(b"not a checkpoint").hexdigest()
    expected = "0123456789abcdef0123456789abcdef"
    registry = make_registry(tmp_path / "remote.pth", expected)
    for _ in range(2):
        with pytest.raises(
            PretrainedChecksumError,
            match=rf"the cached checkpoint {path} has md5 {actual}, expected {expected}: .*delete it to download "
            r"it again from file://.*remote\.pth, or put the right file there",
        ):
            TinyExtractor.from_pretrained("tiny_v1", registry=registry)
    assert hashing == [path]  # the second refusal used the remembered digest
    # a fixed file (the right one put in its place) is accepted
    remote = tmp_path / "remote.pth"
    _, md5 = write_upstream(remote, seed=6)
    path.write_bytes(remote.read_bytes())
    assert pretrained_checkpoint("tiny_v1", make_registry(remote, md5[:8])) == path
    assert hashing == [path, path]


def test_sha256_of_a_cached_file_is_checked(weights_dir: Path) -> None:
    weights_dir.mkdir()
    path = weights_dir / "a.pth"
    path.write_bytes(b"weights")
    sha256 = hashlib.sha256(b"weights").hexdigest()
    assert check_cached_checkpoint(path, sha256=sha256[:8]) == path
    wrong = ("0" if sha256[0] != "0" else "1") + sha256[1:8]
    with pytest.raises(PretrainedChecksumError, match=f"has sha256 {sha256}, expected {wrong}"):
        check_cached_checkpoint(path, sha256=wrong)
    assert check_cached_checkpoint(path) == path  # no digest known: nothing to check


def test_skip_variable_bad_sidecars_and_unwritable_sidecars(
    weights_dir: Path,
    tmp_path: Path,
    hashing: list[Path],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    weights_dir.mkdir()
    path = weights_dir / "tiny_v1.pth"
    _, md5 = write_upstream(path, seed=7)
    wrong = make_registry(tmp_path / "remote.pth", "abcdef01")
    monkeypatch.setenv("OML_SKIP_WEIGHTS_CHECK", "1")
    assert pretrained_checkpoint("tiny_v1", wrong) == path and hashing == []
    monkeypatch.delenv("OML_SKIP_WEIGHTS_CHECK")
    # a sidecar that cannot be parsed is ignored and rewritten
    digests_sidecar(path).write_text("{not json")
    right = make_registry(tmp_path / "remote.pth", md5)
    pretrained_checkpoint("tiny_v1", right)
    assert hashing == [path] and json.loads(digests_sidecar(path).read_text())["md5"] == md5
    # a sidecar that cannot be written is logged: the file is used, and hashed again next time
    digests_sidecar(path).unlink()

    def read_only(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(digests, "atomic_write_bytes", read_only)
    with caplog.at_level(logging.WARNING, logger="oml_core.caches.digests"):
        assert pretrained_checkpoint("tiny_v1", right) == path
        assert pretrained_checkpoint("tiny_v1", right) == path
    assert hashing == [path, path, path] and not digests_sidecar(path).exists()
    assert f"cannot remember the digests of {path}" in caplog.text

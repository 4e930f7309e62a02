"""Where ``oml index build`` and ``oml search`` embed: the keys ``accelerator`` and ``devices`` (``--accelerator``,
``--devices``) with the pipelines' meaning, on one device. On the CPU the index holds the embeddings of the seeded
model computed independently (the index of before the keys); more than one device, or a GPU the machine lacks, is
one error line before anything is read or written, worded as the pipelines word it. On a machine with CUDA, an
index built on the GPU is the CPU's (the same files but the embeddings, which are close), and each device searches
the other's index alike."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from oml_core.cli import main
from oml_core.datasets.mock import get_mock_dataset_root
from oml_core.engine import check_cuda_devices, one_device, parse_engine_params
from oml_core.index import GalleryIndex
from oml_core.index.integrity import PROBE_TOLERANCE
from oml_core.inference import inference_on_images
from oml_core.lightning.pipelines.shared.preflight import check_engine
from oml_core.registry import ConfigError, Registry
from oml_core.utils.precision import without_tf32
from tests.scripts.devices import no_gpu_case

#: The mock dataset's rows of the small set: two train labels, two validation labels, four pictures each.
ROWS = [*range(0, 4), *range(8, 12), *range(128, 132), *range(136, 140)]
#: The extractor and transforms of ``index_build.yaml``.
EXTRACTOR = {
    "name": "resnet",
    "args": {
        "weights": None,
        "arch": "resnet18",
        "gem_p": None,
        "remove_fc": True,
        "normalise_features": True,
    },
}
TRANSFORMS = {"name": "norm_resize", "args": {"im_size": 64}}
#: The seed of ``index_build.yaml``, which seeds the extractor's random weights.
SEED = 42
CUDA = torch.cuda.is_available()
#: The files of an index that do not depend on the device that embedded it.
DEVICE_FREE_FILES = ("index.json", "gen-1/items.arrow", "weights.pt", "probe.png")


@pytest.fixture(scope="module")
def dataset_root(tmp_path_factory, oml_cache_dir) -> Path:
    """16 pictures of the mock dataset with their rows (8 train, 8 validation: every one a query and a gallery
    item), in a folder of their own."""
    mock = get_mock_dataset_root(oml_cache_dir)
    root = tmp_path_factory.mktemp("small_figures")
    df = pd.read_csv(mock / "df.csv").iloc[ROWS]
    (root / "images").mkdir()
    for path in df["path"]:
        shutil.copyfile(mock / path, root / path)
    df.to_csv(root / "df.csv", index=False)
    return root


def build(root: Path, index_dir: Path, *overrides: str) -> None:
    """``oml index build`` of the small set into ``index_dir``, calibrated to the highest F1."""
    argv = ["index", "build", f"dataset_root={root}", f"index_dir={index_dir}", "calibration.target=f1"]
    assert main([*argv, "calibration.value=null", *overrides]) == 0


@pytest.fixture(scope="module")
def cpu_index(dataset_root, tmp_path_factory) -> Path:
    index_dir = tmp_path_factory.mktemp("indices") / "cpu"
    build(dataset_root, index_dir, "accelerator=cpu", "devices=1")
    return index_dir


def saved_embeddings(index_dir: Path) -> torch.Tensor:
    return torch.from_numpy(np.load(index_dir / "gen-1" / "embeddings.npy"))


def one_error_line(capsys, argv: list[str]) -> str:
    """The one line that ``oml ARGV`` prints on stderr, exiting with 2 (a user's error)."""
    status = main(argv)
    lines = capsys.readouterr().err.splitlines()
    assert status == 2 and len(lines) == 1, lines
    return lines[0]


# -------------------------------------------------------------------------------------------- on the CPU
def test_accelerator_cpu_builds_the_embeddings_of_the_seeded_model(dataset_root, cpu_index):
    """The index of ``accelerator=cpu`` holds what the index always held: the embeddings (float32, CPU) that the
    seeded ResNet18 of the config gives to the pictures through OML's ``inference_on_images``, in row order, and
    that model's weights; nothing of the device is saved."""
    registry = Registry()
    torch.manual_seed(SEED)
    model = registry.build("extractor", EXTRACTOR)
    paths = [dataset_root / p for p in pd.read_csv(dataset_root / "df.csv")["path"]]
    expected = inference_on_images(model, paths, registry.build("transforms", TRANSFORMS), batch_size=64)
    embeddings = saved_embeddings(cpu_index)
    assert embeddings.dtype == torch.float32 and embeddings.device.type == "cpu"
    assert embeddings.shape == (16, 512) and torch.equal(embeddings, expected)
    weights = torch.load(cpu_index / "weights.pt", weights_only=True)["state_dict"]
    assert weights.keys() == model.state_dict().keys()
    assert all(torch.equal(weights[name], value) for name, value in model.state_dict().items())
    meta = (cpu_index / "index.json").read_text()
    assert not any(word in meta for word in ("accelerator", "devices", "cuda", '"device"'))


def test_a_list_of_one_device_on_the_cpu_builds_the_same_bytes(dataset_root, cpu_index, tmp_path):
    build(dataset_root, tmp_path / "listed", "accelerator=cpu", "devices=[0]")
    files = sorted(p.relative_to(cpu_index) for p in cpu_index.rglob("*") if p.is_file())
    assert files == sorted(
        p.relative_to(tmp_path / "listed") for p in (tmp_path / "listed").rglob("*") if p.is_file()
    )
    for file in files:
        assert (cpu_index / file).read_bytes() == (tmp_path / "listed" / file).read_bytes(), file


ONE_DEVICE = (
    "but this pipeline runs on one device: set devices to 1 or to a list of one device index, e.g. [0]"
)
BAD_DEVICES = [
    (["devices=2"], f"index_build: devices=2, {ONE_DEVICE}"),
    (["accelerator=cpu", "devices=[0,1]"], f"index_build: devices=[0, 1], {ONE_DEVICE}"),
    (["accelerator=cpu", "devices=3"], f"index_build: devices=3, {ONE_DEVICE}"),
    no_gpu_case(),
    (["accelerator=tpu"], "accelerator must be null or one of ['cpu', 'gpu', 'cuda'], got 'tpu'"),
    (["devices=0"], "devices must be null, a positive integer or a non-empty list of device indices, got 0"),
    (
        ["devices=[]"],
        "devices must be null, a positive integer or a non-empty list of device indices, got []",
    ),
]


@pytest.mark.parametrize(("overrides", "message"), BAD_DEVICES)
def test_bad_devices_are_one_line_before_anything_is_read_or_written(tmp_path, capsys, overrides, message):
    """The dataset root does not exist: the device is checked before it is looked at."""
    index_dir = tmp_path / "index"
    argv = ["index", "build", f"dataset_root={tmp_path / 'no_data'}", f"index_dir={index_dir}", *overrides]
    assert one_error_line(capsys, argv) == f"oml index build: error: {message}"
    assert list(tmp_path.iterdir()) == []


def test_a_missing_gpu_is_worded_as_the_pipelines_word_it():
    """``oml validate`` and the other pipelines check their engine with ``check_engine``: the same line."""
    overrides, message = no_gpu_case()
    devices = json.loads(overrides[1].split("=")[1]) if len(overrides) > 1 else 1
    engine = {"accelerator": "gpu", "devices": devices, "num_nodes": 1}
    with pytest.raises(ConfigError) as pipelines:
        check_engine(engine, 32)
    with pytest.raises(ConfigError) as index_build:
        one_device("gpu", devices, "index_build")
    assert str(pipelines.value) == str(index_build.value) == message


def test_one_device_means_what_the_engine_keys_mean():
    assert one_device("cpu", 1, "p") == torch.device("cpu")
    assert one_device("cpu", [0], "p") == torch.device("cpu")
    assert one_device("cpu", None, "p") == torch.device("cpu")  # null on the CPU: 1
    assert one_device(None, 1, "p") == torch.device("cuda:0" if CUDA else "cpu")
    if CUDA:
        assert one_device("cuda", [torch.cuda.device_count() - 1], "p").index == torch.cuda.device_count() - 1
    with pytest.raises(ConfigError, match=r"^p: devices=\[0, 1\], but this pipeline runs on one device"):
        one_device("cpu", [0, 1], "p")
    with pytest.raises(
        ConfigError, match=r"^accelerator: 'mps', but p runs on one of \['cpu', 'gpu', 'cuda'\]"
    ):
        one_device("mps", 1, "p")
    for bad in (0, [], ["a"], [-1], True):
        with pytest.raises(
            ConfigError, match="^devices must be null, a positive number of devices or a list"
        ):
            one_device("cpu", bad, "p")
    with pytest.raises(ConfigError, match=r"^devices must be null, .* got \['a'\]"):
        parse_engine_params("cpu", ["a"])  # the pipelines read devices alike
    check_cuda_devices("cpu", 7)  # the CPU asks for no GPU


def test_search_takes_the_device_options(cpu_index, dataset_root, capsys):
    query = str(dataset_root / "images" / "circle_1.jpg")

    def answer(*options: str) -> dict:
        assert main(["search", str(cpu_index), query, "--format", "json", *options]) == 0
        return json.loads(capsys.readouterr().out)

    default = answer()
    assert default["queries"][0]["results"][0]["path"] == query
    assert answer("--accelerator", "cpu", "--devices", "[0]") == default
    assert answer("--accelerator", "null", "--devices", "null") == default or CUDA  # null: the GPU with CUDA
    gpu_overrides, gpu_message = no_gpu_case()
    gpu_options = ["--accelerator", "gpu"] + (["--devices", gpu_overrides[1].split("=")[1]] if CUDA else [])
    for options, message in [
        (["--devices", "2"], f"oml search: error: search: devices=2, {ONE_DEVICE}"),
        (gpu_options, f"oml search: error: {gpu_message}"),
        (["--devices", "two"], "must be 1, a list of one device index such as [0], or null, got 'two'"),
        (["--accelerator", "tpu"], "invalid choice: 'tpu' (choose from 'cpu', 'gpu', 'cuda', 'null')"),
    ]:
        line = one_error_line(capsys, ["search", str(cpu_index), query, *options])
        assert line.startswith("oml search: error: ") and line.endswith(message), line


def test_without_tf32_switches_tf32_off_inside_and_restores_it():
    before = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = True, True
        with without_tf32():
            assert (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32) == (False, False)
        assert (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32) == (True, True)
        with pytest.raises(RuntimeError), without_tf32():
            raise RuntimeError("restored on error too")
        assert torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = before


# ------------------------------------------------------------------------------------------- on the GPU
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_an_index_built_on_the_gpu_is_the_cpus(dataset_root, cpu_index, tmp_path):
    """``accelerator=gpu``: the same config, items, weights and probe picture as the CPU's index; embeddings
    float32 on the CPU within 1e-4 (relative L2) of the CPU's, far inside the probe's tolerance. Each device
    searches the other's index (its probe checked) and finds the same items.

    Distances (and the threshold, one of them) are compared squared: the exact backend's l2 distance is
    ``sqrt(|q|^2 + |g|^2 - 2 q.g)``, whose float32 rounding (~1e-7 for these unit-norm embeddings) the square
    root makes ~3e-4 near 0 (an item searched by itself on another device is ~3e-4 away, on its own device 0).
    Embeddings 1e-6 apart move a squared distance by less than 1e-5."""
    gpu_index = tmp_path / "gpu"
    build(dataset_root, gpu_index, "accelerator=gpu", "devices=1")
    for name in DEVICE_FREE_FILES:
        assert (gpu_index / name).read_bytes() == (cpu_index / name).read_bytes(), name
    on_gpu, on_cpu = saved_embeddings(gpu_index), saved_embeddings(cpu_index)
    assert on_gpu.dtype == torch.float32 and on_gpu.device.type == "cpu" and on_gpu.shape == on_cpu.shape
    relative = (on_gpu - on_cpu).norm(dim=1) / on_cpu.norm(dim=1)
    assert float(relative.max()) < min(1e-4, PROBE_TOLERANCE)
    thresholds = [
        json.loads((i / "gen-1" / "calibration.json").read_text())["threshold"]
        for i in (gpu_index, cpu_index)
    ]
    assert abs(thresholds[0] ** 2 - thresholds[1] ** 2) < 1e-5
    queries = [dataset_root / "images" / name for name in ("circle_1.jpg", "circle_17.jpg", "circle_26.jpg")]
    hits = {
        (built, searched): GalleryIndex.load(folder, registry=Registry(), device=searched).search(
            queries, top_k=4
        )
        for built, folder in (("gpu", gpu_index), ("cpu", cpu_index))
        for searched in ("cuda", "cpu")
    }
    reference = hits[("cpu", "cpu")]
    for key, found in hits.items():
        assert [[h.id for h in q] for q in found] == [[h.id for h in q] for q in reference], key
        for query, expected in zip(found, reference):
            squared = [(h.distance**2, e.distance**2) for h, e in zip(query, expected)]
            assert all(abs(a - b) < 1e-5 for a, b in squared), (key, squared)

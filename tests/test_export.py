"""``oml export`` of the tiny ``oml train`` run's checkpoint (a ResNet18 on 32 px mock pictures) to ONNX, checked
against the PyTorch model; the ``onnx`` extractor in ``oml validate``, ``oml index build`` and ``oml search``; the
refused exports (a graph that differs from its model, an operator without an ONNX export, an extractor that states
no signature) and the one-line errors of the command."""

from __future__ import annotations

import hashlib
import io
import json
import re
import shlex
import shutil
import sys
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import onnxruntime
import pytest
import torch
from torch import nn

from oml_core.cli import main
from oml_core.config.compose import compose_config
from oml_core.export import ExportError, ExportSource, read_export_manifest, write_export
from oml_core.export.extractor import OnnxExtractor
from oml_core.export.manifest import hydra_value
from oml_core.export.signatures import image_signature
from oml_core.index import GalleryIndex
from oml_core.index.storage import WEIGHTS_FILE, read_weights
from oml_core.interfaces.export import ExportContext, ExportSignature, IExportable
from oml_core.interfaces.models import IExtractor
from oml_core.io.provenance import state_dict_sha256
from oml_core.lightning.pipelines import extractor_validation_pipeline
from oml_core.registry import Registry

README = Path(__file__).resolve().parents[1] / "README.md"
IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]


def readme_commands() -> list[list[str]]:
    """The ``oml`` commands of the README's section on ONNX export, as argument lists (without ``oml``)."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Exporting a model to ONNX\n", 1)[1].split("\n## ", 1)[0]
    (shell,) = re.findall(r"^```sh\n(.*?)^```", section, flags=re.MULTILINE | re.DOTALL)
    commands = [shlex.split(line, comments=True) for line in shell.splitlines() if line.strip()]
    assert [argv[:2] for argv in commands] == [["oml", "export"], ["oml", "validate"], ["oml", "index"]]
    return [argv[1:] for argv in commands]


@dataclass(frozen=True)
class TrainedExport:
    """The README's ``oml export`` run as written in ``folder``, where ``logs/first_run/checkpoints/best.ckpt`` is
    the tiny ``oml train`` run's best checkpoint (a ResNet18 trained on 32 px pictures)."""

    folder: Path
    printed: str

    @property
    def checkpoint(self) -> Path:
        return self.folder / "logs" / "first_run" / "checkpoints" / "best.ckpt"

    @property
    def export(self) -> Path:
        return self.folder / "my_export"


@pytest.fixture(scope="module")
def trained_export(tiny_trained_run, tmp_path_factory) -> TrainedExport:
    folder = tmp_path_factory.mktemp("readme")
    done = TrainedExport(folder, "")
    done.checkpoint.parent.mkdir(parents=True)
    shutil.copyfile(tiny_trained_run.best_checkpoint, done.checkpoint)
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, redirect_stdout(out):
        patch.chdir(folder)
        assert main(readme_commands()[0]) == 0
    return TrainedExport(folder, out.getvalue())


def test_the_export_of_a_checkpoint_writes_the_graph_and_its_manifest(trained_export):
    checkpoint, folder, printed = trained_export.checkpoint, trained_export.export, trained_export.printed
    assert sorted(p.name for p in folder.iterdir()) == ["export.json", "model.onnx"]
    manifest = read_export_manifest(folder)
    data = manifest.data
    assert manifest.weights_sha256 == hashlib.sha256(checkpoint.read_bytes()).hexdigest()
    assert data["source"] == {"kind": "checkpoint", "name": str(checkpoint.resolve())}
    assert data["extractor"]["name"] == "resnet"
    assert data["extractor"]["args"]["weights"] == str(checkpoint.resolve())
    assert data["inputs"] == [{"name": "images", "dtype": "float32", "shape": ["batch", 3, 32, 32]}]
    assert data["output"] == {"name": "embeddings", "dtype": "float32", "shape": ["batch", 512]}
    assert manifest.feat_dim == 512 and data["opset"] == 20
    pre = manifest.preprocessing
    assert (pre["image_size"], pre["interpolation"]) == (32, "bilinear")
    assert pre["mean"] == pytest.approx(IMAGENET_MEAN) and pre["std"] == pytest.approx(IMAGENET_STD)
    assert pre["transforms"] == {"name": "norm_resize", "args": {"im_size": 32}}
    assert data["model_sha256"] == hashlib.sha256((folder / "model.onnx").read_bytes()).hexdigest()
    parity = data["parity"]
    assert [probe["batch_size"] for probe in parity["probes"]] == [
        3,
        1,
    ]  # not the example's 2: a dynamic axis
    assert parity["tolerance"] == 1e-4 and 0 <= parity["max_relative_l2"] <= 1e-4
    assert printed.splitlines()[0] == f"Exported:         resnet of the checkpoint {checkpoint.resolve()}"
    assert printed.splitlines()[-1] == (
        "Run it:           oml validate extractor@extractor=onnx extractor.args.path=my_export "
        "'transforms_val={name: norm_resize, args: {im_size: 32}}'"
    )


def test_the_onnx_extractor_embeds_as_the_pytorch_model_at_any_batch_size(trained_export):
    folder = trained_export.export
    registry = Registry()
    onnx = registry.build("extractor", "onnx", path=str(folder))
    assert isinstance(onnx, OnnxExtractor) and onnx.feat_dim == 512
    assert onnx.manifest.weights_sha256 == read_export_manifest(folder).weights_sha256
    spec = read_export_manifest(folder).data["extractor"]
    model = registry.build("extractor", spec).eval()
    x = torch.randn(5, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model(x)
    found = onnx(x)
    assert found.shape == (5, 512) and found.dtype == torch.float32
    assert float(torch.linalg.vector_norm(found - expected) / torch.linalg.vector_norm(expected)) < 1e-4


def test_validation_with_the_onnx_extractor_gives_the_checkpoints_metrics(
    trained_export, monkeypatch, tmp_path
):
    """The README's ``oml validate`` on the export (images of 32 px, as the tiny run's), the one ``oml export``
    printed (``Run it:``, which names the transforms itself) and on the checkpoint."""
    monkeypatch.chdir(trained_export.folder)
    registry = Registry()
    size = "transforms_val.args.im_size=32"
    printed = shlex.split(trained_export.printed.splitlines()[-1].removeprefix("Run it:"))
    assert printed[:2] == ["oml", "validate"]
    metrics = {}
    for name, overrides in (
        ("torch", [f"extractor.args.weights={trained_export.checkpoint}", size]),
        ("onnx", [*readme_commands()[1][1:], size]),
        ("printed", printed[2:]),
    ):
        cfg = compose_config(
            "extractor_validation_pipeline", [*overrides, f"logs_root={tmp_path}"], registry=registry
        )
        metrics[name] = extractor_validation_pipeline(cfg, registry=registry).metrics
    assert metrics["onnx"].keys() == metrics["torch"].keys() and "OVERALL/cmc/1" in metrics["onnx"]
    for key, value in metrics["torch"].items():
        assert metrics["onnx"][key] == pytest.approx(value, abs=1e-4), key
        assert metrics["printed"][key] == metrics["onnx"][key], key


def test_an_index_built_on_the_export_finds_what_the_checkpoints_index_finds(
    trained_export, monkeypatch, tmp_path, capsys
):
    """The README's ``oml index build`` on the export, and the same index of the checkpoint: the same hits."""
    monkeypatch.chdir(trained_export.folder)
    indexes = {"torch": tmp_path / "torch", "onnx": trained_export.folder / "my_onnx_index"}
    checkpoint_build = ["index", "build", f"extractor.args.weights={trained_export.checkpoint}"]
    for build in ([*checkpoint_build, f"index_dir={indexes['torch']}"], readme_commands()[2]):
        assert main([*build, "transforms.args.im_size=32"]) == 0
    index = GalleryIndex.load(indexes["onnx"])
    queries = [str(path) for path in index.paths[:4]]
    capsys.readouterr()
    answers = {}
    for name, index_dir in indexes.items():
        assert main(["search", str(index_dir), *queries, "--top-k", "3", "--format", "json"]) == 0
        answers[name] = json.loads(capsys.readouterr().out)["queries"]
    assert main(["export", str(indexes["torch"]), "--output", str(tmp_path / "index_onnx")]) == 0
    exported = read_export_manifest(tmp_path / "index_onnx")
    index_json = json.loads((indexes["torch"] / "index.json").read_text())
    assert exported.data["source"] == {"kind": "index", "name": str(indexes["torch"])}
    assert exported.weights_sha256 == index_json["weights_sha256"] is not None  # what serving compares
    # the export of the checkpoint holds the tensors of the index built from it, in another file: the same digest
    # of tensors (serving accepts either), which another model's would not have
    weights = read_weights(indexes["torch"] / WEIGHTS_FILE, index_json["weights_sha256"])
    of_checkpoint = read_export_manifest(trained_export.export)
    assert of_checkpoint.weights_sha256 != index_json["weights_sha256"]
    assert of_checkpoint.state_dict_sha256 == state_dict_sha256(weights) == exported.state_dict_sha256
    assert state_dict_sha256({**weights, "fc.bias": torch.zeros(1)}) != of_checkpoint.state_dict_sha256
    for torch_answer, onnx_answer in zip(answers["torch"], answers["onnx"]):
        assert [hit["id"] for hit in onnx_answer["results"]] == [hit["id"] for hit in torch_answer["results"]]
        distances = zip(onnx_answer["results"], torch_answer["results"])
        # near 0 an L2 distance is the square root of a difference of float32 squares: within sqrt(1e-6)
        assert all(a["distance"] == pytest.approx(b["distance"], abs=1e-3) for a, b in distances)


def test_a_state_dict_exports_with_the_config_given(tmp_path):
    """A checkpoint that records no run (a plain state dict) with ``--config``: a yaml of the pipeline's keys."""
    from oml_models import ResnetExtractor

    torch.manual_seed(0)
    model = ResnetExtractor(None, "resnet18", gem_p=None, remove_fc=True, normalise_features=False).eval()
    torch.save(model.state_dict(), tmp_path / "resnet.pth")
    (tmp_path / "train.yaml").write_text(
        "extractor: {name: resnet, args: {arch: resnet18, gem_p: null, remove_fc: true, normalise_features: false, "
        "weights: null}}\ntransforms_val: {name: norm_resize, args: {im_size: 16}}\n"
    )
    argv = [
        "export",
        str(tmp_path / "resnet.pth"),
        "--config",
        str(tmp_path / "train.yaml"),
        "-o",
        str(tmp_path / "x"),
    ]
    assert main(argv) == 0
    onnx = OnnxExtractor(tmp_path / "x")
    assert onnx.manifest.data["inputs"][0]["shape"] == ["batch", 3, 16, 16]
    assert onnx.manifest.weights_sha256 == hashlib.sha256((tmp_path / "resnet.pth").read_bytes()).hexdigest()
    x = torch.randn(3, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = model(x)
    assert float(torch.linalg.vector_norm(onnx(x) - expected) / torch.linalg.vector_norm(expected)) < 1e-4


def test_a_zoo_key_exports_its_cached_checkpoint_with_the_zoos_transforms(tmp_path, monkeypatch, capsys):
    from torchvision.models import resnet18

    monkeypatch.setenv("OML_WEIGHTS_DIR", str(tmp_path / "weights"))
    monkeypatch.setenv("OML_SKIP_WEIGHTS_CHECK", "1")  # local random weights under the zoo file's name
    monkeypatch.setenv("OML_OFFLINE", "1")
    (tmp_path / "weights").mkdir()
    checkpoint = tmp_path / "weights" / "resnet18-f37072fd.pth"
    torch.manual_seed(0)
    torch.save(resnet18(weights=None).state_dict(), checkpoint)
    assert main(["export", "resnet18_imagenet1k_v1", "--output", str(tmp_path / "zoo")]) == 0
    manifest = read_export_manifest(tmp_path / "zoo")
    assert manifest.data["source"] == {"kind": "zoo", "name": "resnet18_imagenet1k_v1"}
    assert manifest.weights_sha256 == hashlib.sha256(checkpoint.read_bytes()).hexdigest()
    pre = manifest.preprocessing  # Resize(256) bicubic, CenterCrop(224), ToTensor, Normalize
    assert (pre["image_size"], pre["interpolation"]) == (224, "bicubic")
    assert [step["type"] for step in pre["steps"]] == ["Resize", "CenterCrop", "ToTensor", "Normalize"]
    assert manifest.data["inputs"][0]["shape"] == ["batch", 3, 224, 224]
    assert manifest.data["parity"]["max_relative_l2"] <= 1e-4


class _ImageExtractor(IExtractor, IExportable):
    """A tiny image extractor: the channel means of an 8 px image through a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 4)

    @property
    def feat_dim(self) -> int:
        return 4

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x.mean(dim=(2, 3)))

    def export_signature(self, context: ExportContext) -> ExportSignature:
        return image_signature(self, context, 8)


class _OffByOneInTheGraph(_ImageExtractor):
    """Its graph adds 1 to what PyTorch computes: the export traces the other branch."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        return y + 1 if torch.onnx.is_in_onnx_export() else y


class _RunningMaximum(_ImageExtractor):
    """Uses ``torch.cummax``, which has no ONNX export."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cummax(super().forward(x), dim=1).values


class _DataDependent(_ImageExtractor):
    """Branches on the values of its input: torch cannot trace one graph of it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        return 2 * y if bool(y.sum() > 0) else y


class _NoSignature(IExtractor):
    @property
    def feat_dim(self) -> int:
        return 3

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(2, 3))


def _source(extractor: nn.Module) -> ExportSource:
    return ExportSource("checkpoint", "tiny.ckpt", extractor, {"name": "tiny", "args": {}}, None, None, None)


def test_a_graph_that_differs_from_its_model_is_refused_with_both_figures_and_nothing_written(tmp_path):
    output = tmp_path / "off"
    with pytest.raises(ExportError) as raised:
        write_export(_source(_OffByOneInTheGraph()), output, Registry())
    message = str(raised.value)
    assert message.startswith("the extractor 'tiny' of tiny.ckpt: its ONNX graph gives embeddings ")
    assert "(relative L2) from the PyTorch model's on probe inputs {'images': [" in message
    assert message.endswith("above the tolerance 0.0001: the export is refused and nothing is written")
    assert list(tmp_path.iterdir()) == []  # neither the folder nor its temporary


def test_an_operator_without_an_onnx_export_is_one_line_naming_it(tmp_path):
    with pytest.raises(ExportError) as raised:
        write_export(_source(_RunningMaximum()), tmp_path / "cummax", Registry())
    assert str(raised.value) == (
        f"the extractor 'tiny' of tiny.ckpt cannot be exported to ONNX: the operator aten.cummax has no ONNX export "
        f"in torch {torch.__version__} (opset 20); replace it in the model, or keep the model in PyTorch"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_model_torch_cannot_trace_is_one_line_and_nothing_printed(tmp_path, capfd):
    with pytest.raises(ExportError) as raised:
        write_export(_source(_DataDependent()), tmp_path / "branches", Registry())
    assert str(raised.value).startswith(
        "the extractor 'tiny' of tiny.ckpt cannot be exported to ONNX: GuardOnDataDependentSymNode: Could not guard "
        "on data-dependent expression"
    )
    assert capfd.readouterr() == ("", "")  # torch's exporter prints its partial graph: to the debug log
    assert list(tmp_path.iterdir()) == []


def test_an_extractor_without_a_signature_is_refused(tmp_path):
    with pytest.raises(ExportError, match="_NoSignature states no export signature"):
        write_export(_source(_NoSignature()), tmp_path / "none", Registry())


def test_bad_input_is_one_line_before_any_work(trained_export, tmp_path, capsys):
    checkpoint = trained_export.checkpoint
    weights_only = tmp_path / "weights.pth"
    torch.save({"linear.weight": torch.zeros(2, 2)}, weights_only)
    not_empty = tmp_path / "full"
    not_empty.mkdir()
    (not_empty / "keep.txt").write_text("kept")
    cases = {
        (
            "export",
            str(checkpoint),
            "--output",
            str(not_empty),
        ): f"--output {not_empty}: exists and is not an empty folder; an export is never written over it",
        ("export", str(tmp_path / "no.ckpt"), "--output", str(tmp_path / "a")): f"{tmp_path / 'no.ckpt'}: no "
        f"such checkpoint file or index folder",
        (
            "export",
            str(weights_only),
            "--output",
            str(tmp_path / "b"),
        ): f"{weights_only}: records no config of "
        f"its run (it was not written by oml train); give the config it was trained with: oml export "
        f"{weights_only} --config CONFIG.yaml --output DIR",
        (
            "export",
            str(tmp_path),
            "--output",
            str(tmp_path / "c"),
        ): f"{tmp_path}: a folder without index.json is not a gallery index (oml index build)",
        (
            "export",
            "resnet18_imagenet1k_v1",
            "--config",
            "x.yaml",
            "--output",
            str(tmp_path / "d"),
        ): "--config goes with a checkpoint file; resnet18_imagenet1k_v1 is not one (an index or a zoo key)",
    }
    for argv, message in cases.items():
        assert main(list(argv)) == 2, argv
        captured = capsys.readouterr()
        assert captured.err.splitlines() == [f"oml export: error: {message}"] and captured.out == ""
    assert (not_empty / "keep.txt").read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full", "weights.pth"]
    with pytest.raises(ExportError, match="no such export folder"):
        OnnxExtractor(tmp_path / "nothing")
    with pytest.raises(ExportError, match="export.json: no such file"):
        OnnxExtractor(not_empty)
    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():  # the CPU build of onnxruntime
        with pytest.raises(
            ExportError, match="needs onnxruntime's CUDAExecutionProvider, which this onnxruntime"
        ):
            OnnxExtractor(trained_export.export, device="cuda")


def test_without_onnxruntime_export_and_the_extractor_say_what_to_install(trained_export, tmp_path, capsys):
    checkpoint, folder = trained_export.checkpoint, trained_export.export
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "onnxruntime", None)  # as if it were not installed: its import fails
        assert main(["export", str(checkpoint), "--output", str(tmp_path / "out")]) == 2
        assert capsys.readouterr().err.splitlines() == [
            "oml export: error: oml export (its parity check) needs onnxruntime, which is not installed: pip install "
            "'oml-core[onnx]'"
        ]
        with pytest.raises(
            ExportError, match=r"needs onnxruntime, which is not installed: pip install 'oml-core\[onnx\]'"
        ):
            OnnxExtractor(folder)
    assert list(tmp_path.iterdir()) == []


def test_the_onnx_extractor_refuses_inputs_of_another_shape_in_one_line(trained_export):
    onnx = OnnxExtractor(trained_export.export)
    with pytest.raises(ExportError) as raised:
        onnx(torch.zeros(2, 3, 64, 64))
    assert str(raised.value) == (
        f"the export {trained_export.export} takes images of shape [batch, 3, 32, 32], got [2, 3, 64, 64]: give "
        f"it inputs made by its preprocessing (export.json)"
    )


@pytest.mark.parametrize(
    "value",
    [
        {
            "name": "texts",
            "args": {"tokenizer": "/models/all-MiniLM-L6-v2", "max_length": 128, "download": False},
        },
        [
            "a b",
            "it's",
            "c:\\d",
            "end\\",
            "a\\'b",
            "x=y,z",
            "true",
            "null",
            "1e5",
            "inf",
            ".5",
            "-x",
            None,
            2.5,
        ],
    ],
)
def test_hydra_value_is_read_back_by_hydra_as_the_value(value):
    from hydra.core.override_parser.overrides_parser import OverridesParser

    assert OverridesParser.create().parse_override(f"key={hydra_value(value)}").value() == value

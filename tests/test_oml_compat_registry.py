"""OML 4.0's registry names and helpers under ``oml_core.registry``: every name of OML's ``oml/registry/*.py``
dicts is registered (the optimizers ``adadelta``, ``asgd``, ``lbfgs``, ``rprop`` and the scheduler
``multiplicative`` among them), OML's ``get_*`` builders build nested specs and drop what OML drops, and
``show_registry``, ``raise_if_needed``, ``save_transforms_as_files`` behave as OML's; values computed by hand."""

from __future__ import annotations

import io
import math
import warnings
from pathlib import Path

import albumentations as albu
import pytest
import torch
from omegaconf import OmegaConf
from oml_core.registry.losses import get_criterion
from oml_core.registry.models import get_pairwise_model, raise_if_needed
from oml_core.registry.optimizers import OPTIMIZERS_REGISTRY, get_optimizer, get_optimizer_by_cfg
from oml_core.registry.samplers import get_sampler
from oml_core.registry.schedulers import SCHEDULERS_REGISTRY, get_scheduler, get_scheduler_by_cfg
from oml_core.registry.transforms import TRANSFORMS_REGISTRY, save_transforms_as_files

from oml_core.const import CONFIGS_PATH
from oml_core.registry import UnexpectedArgumentError, UnknownNameError, default_registry, show_registry

#: The keys of OML 4.0's registry dicts (``oml/registry/*.py`` at 6be182e), by oml's kind.
OML_NAMES = {
    "loss": [
        "triplet",
        "triplet_plain",
        "triplet_with_miner",
        "surrogate_precision",
        "arcface",
        "mlp_arcface",
    ],
    "miner": [
        "all_triplets",
        "hard_cluster",
        "hard_triplets",
        "triplets_with_memory",
        "miner_with_bank",
        "n_hard_triplets",
    ],
    "sampler": ["category_balance", "distinct_category_balance", "balance"],
    "extractor": ["resnet", "vit", "vit_clip", "vit_unicom", "extractor_with_mlp"],
    "pairwise_model": ["linear_siamese", "concat_siamese", "trivial_distance_siamese"],
    "postprocessor": ["pairwise_reranker", "constant_thresholding", "adaptive_thresholding"],
    "logger": ["wandb", "neptune", "tensorboard", "mlflow", "clearml"],
    "optimizer": [
        "adadelta",
        "adagrad",
        "adam",
        "adamw",
        "adamax",
        "asgd",
        "lbfgs",
        "rmsprop",
        "rprop",
        "sgd",
    ],
    "scheduler": [
        "lambda",
        "multiplicative",
        "step",
        "multi_step",
        "exponential",
        "cosine_annealing",
        "cyclic",
        "one_cycle",
        "reduce_on_plateau",
    ],
    "transforms": [
        "norm_albu",
        "norm_resize_albu",
        "norm_resize_albu_clip",
        "augs_torch",
        "norm_torch",
        "norm_resize_torch",
        "augs_hypvit_torch",
        "norm_resize_hypvit_torch",
        "unicom_transforms",
    ],
}


@pytest.mark.parametrize("kind", list(OML_NAMES))
def test_every_name_of_omls_registries_is_registered(kind: str) -> None:
    assert set(OML_NAMES[kind]) <= set(default_registry().names(kind))


def one_step(name: str, **args: float) -> float:
    """The parameter ``1.0`` after one step of the optimizer ``name`` on ``f(x) = x ** 2`` (gradient 2)."""
    x = torch.nn.Parameter(torch.tensor([1.0]))
    optimizer = get_optimizer(name, params=[x], **args)
    optimizer.zero_grad()
    (x**2).sum().backward()
    optimizer.step()
    return x.item()


def test_the_new_optimizers_are_torchs_and_step_as_their_formulas() -> None:
    for name, cls in [
        ("adadelta", torch.optim.Adadelta),
        ("asgd", torch.optim.ASGD),
        ("lbfgs", torch.optim.LBFGS),
        ("rprop", torch.optim.Rprop),
    ]:
        assert OPTIMIZERS_REGISTRY[name] is cls
    # Rprop's first step is -lr * sign(g): 1 - 0.01
    assert one_step("rprop", lr=0.01) == pytest.approx(0.99)
    # ASGD: x (1 - lambd lr) - lr g = 1 (1 - 1e-4 * 0.1) - 0.1 * 2
    assert one_step("asgd", lr=0.1) == pytest.approx(1 - 1e-5 - 0.2)
    # Adadelta (rho 0.9, eps 1e-6): v = 0.1 g^2 = 0.4; step = sqrt(eps) / sqrt(v + eps) * g, times lr 1
    assert one_step("adadelta", lr=1.0) == pytest.approx(1 - math.sqrt(1e-6) / math.sqrt(0.4 + 1e-6) * 2)


def test_lbfgs_minimises_a_quadratic_with_a_closure() -> None:
    x = torch.nn.Parameter(torch.tensor([0.0]))
    optimizer = get_optimizer_by_cfg({"name": "lbfgs", "args": {"lr": 1.0}}, params=[x])

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = ((x - 3.0) ** 2).sum()
        loss.backward()
        return loss

    optimizer.step(closure)  # up to 20 inner iterations: the minimum x = 3
    assert x.item() == pytest.approx(3.0, abs=1e-4)


def lrs_of(scheduler_cfg: dict, epochs: int = 2, **runtime: object) -> list[float]:
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = get_scheduler_by_cfg(scheduler_cfg, optimizer=optimizer, **runtime)
    lrs = [optimizer.param_groups[0]["lr"]]
    for _ in range(epochs):
        optimizer.step()
        scheduler.step()
        lrs.append(optimizer.param_groups[0]["lr"])
    return lrs


def test_multiplicative_compounds_the_factors_where_lambda_does_not() -> None:
    assert isinstance(
        get_scheduler(
            "multiplicative",
            optimizer=torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0),
            lr_lambda=lambda epoch: 0.9,
        ),
        torch.optim.lr_scheduler.MultiplicativeLR,
    )
    step = {"name": "step", "args": {"step_size": 1, "gamma": 0.5}}  # f(e) = 0.5 ** e
    # multiplicative: lr_e = lr_{e-1} f(e): 1, 0.5, 0.5 * 0.25; lambda: lr_e = lr_0 f(e): 1, 0.5, 0.25
    assert lrs_of({"name": "multiplicative", "args": {"lr_lambda": step}}) == [1.0, 0.5, 0.125]
    assert lrs_of({"name": "lambda", "args": {"lr_lambda": step}}) == [1.0, 0.5, 0.25]
    assert lrs_of({"name": "multiplicative", "args": {}}, lr_lambda=lambda epoch: 0.9) == pytest.approx(
        [1.0, 0.9, 0.81]
    )
    assert "multiplicative" in SCHEDULERS_REGISTRY


@pytest.mark.parametrize(
    ("kind", "name"),
    [("optimizer", n) for n in ("adadelta", "asgd", "lbfgs", "rprop")] + [("scheduler", "multiplicative")],
)
def test_the_default_configs_build(kind: str, name: str) -> None:
    cfg = OmegaConf.to_container(OmegaConf.load(CONFIGS_PATH / kind / f"{name}.yaml"))
    params = [torch.nn.Parameter(torch.zeros(1))]
    if kind == "optimizer":
        assert type(get_optimizer_by_cfg(cfg, params=params)).__name__.lower() == name
    else:
        scheduler = get_scheduler_by_cfg(cfg, optimizer=torch.optim.SGD(params, lr=1.0))
        assert isinstance(scheduler, torch.optim.lr_scheduler.MultiplicativeLR)


def test_omls_builders_build_nested_specs_and_drop_what_oml_drops() -> None:
    loss = get_criterion(
        "triplet_with_miner", margin=0.1, miner={"name": "all_triplets", "args": {}}, not_an_argument=1
    )
    assert type(loss.miner).__name__ == "AllTripletsMiner" and loss.margin == 0.1
    sampler = get_sampler(
        "balance", labels=[0, 0, 1, 1], n_labels=2, n_instances=2, label2category={0: 0, 1: 0}
    )
    assert type(sampler).__name__ == "BalanceSampler"
    resnet = {
        "arch": "resnet18",
        "weights": None,
        "gem_p": None,
        "remove_fc": True,
        "normalise_features": False,
    }
    siamese = get_pairwise_model("trivial_distance_siamese", extractor={"name": "resnet", "args": resnet})
    assert type(siamese.extractor).__name__ == "ResnetExtractor"
    with pytest.raises(UnexpectedArgumentError, match=r"got unexpected argument\(s\) \['momentun'\]"):
        get_optimizer(
            "sgd", params=[torch.nn.Parameter(torch.zeros(1))], lr=0.1, momentun=0.9
        )  # OML raises too


def test_show_registry_prints_omls_sections(capsys: pytest.CaptureFixture[str]) -> None:
    show_registry()
    out = capsys.readouterr().out
    sections = [line for line in out.splitlines() if line.endswith(": ")]
    assert sections == [
        "Losses: ",
        "Miners: ",
        "Models: ",
        "Optimizers: ",
        "Samplers: ",
        "Schedulers: ",
        "Augmentations: ",
    ]
    assert "rprop: Rprop(" in out and "multiplicative: multiplicative_lr(optimizer" in out
    assert "norm_albu: get_normalisation_albu(mean" in out
    stream = io.StringIO()
    show_registry(file=stream)
    assert stream.getvalue() == out


def test_raise_if_needed_as_omls() -> None:
    with pytest.raises(ValueError, match="weights are given both to it .* and to its inner extractor"):
        raise_if_needed({"weights": "a.pth"}, {"weights": "b.pth"}, "extractor_with_mlp")
    with pytest.warns(UserWarning, match="extractor_with_mlp: its weights 'b.pth' may overwrite"):
        raise_if_needed({"weights": None}, {"weights": "b.pth"}, "extractor_with_mlp")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        raise_if_needed({"weights": "a.pth"}, {"weights": None}, "extractor_with_mlp")
        raise_if_needed({}, {"weights": "b.pth"}, "extractor_with_mlp")


def test_save_transforms_as_files_writes_the_albumentations_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = {
        "transforms_train": {"name": "norm_resize_albu", "args": {"im_size": 64}},
        "transforms_val": {"name": "norm_resize_torch", "args": {"im_size": 48}},  # no serialisation: skipped
        "criterion": {"name": "triplet", "args": {}},  # not a transforms key
        "num_workers": 0,
    }
    assert save_transforms_as_files(cfg) == [("transforms_train", "transforms_train.yaml")]
    loaded = albu.load(str(tmp_path / "transforms_train.yaml"), data_format="yaml")
    assert [type(t).__name__ for t in loaded.transforms] == [
        "LongestMaxSize",
        "PadIfNeeded",
        "Normalize",
        "ToTensorV2",
    ]
    (tmp_path / ".hydra").mkdir()
    assert save_transforms_as_files(OmegaConf.create(cfg)) == [
        ("transforms_train", ".hydra/transforms_train.yaml")
    ]
    assert (tmp_path / ".hydra" / "transforms_train.yaml").is_file()
    with pytest.raises(UnknownNameError, match="norm_resize_albo"):
        save_transforms_as_files({"transforms_train": {"name": "norm_resize_albo", "args": {}}})


def test_the_transforms_view_lists_the_albumentations_and_unicom_names() -> None:
    assert {"norm_albu", "norm_resize_albu", "unicom_transforms"} <= set(TRANSFORMS_REGISTRY)
    assert TRANSFORMS_REGISTRY["norm_albu"].__name__ == "get_normalisation_albu"

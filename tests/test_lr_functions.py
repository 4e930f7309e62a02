"""The learning-rate functions (kind ``lr_function``) and the ``lambda`` scheduler that takes them: each function's
factors against hand-computed ones, its argument checks, the registry's names, default configs and nested specs,
``lambda_lr`` in library use, and a short training run whose optimizer follows ``linear_warmup`` epoch by epoch."""

from __future__ import annotations

import math
from typing import Annotated, Optional

import pytest
import torch
from torch.optim.lr_scheduler import LambdaLR

from oml_core.builtins.lr_functions import constant, cosine, linear_warmup, step
from oml_core.builtins.schedules import lambda_lr
from oml_core.cli import main
from oml_core.config.rules import ComponentSpec
from oml_core.config.schemas import SchedulingConfig
from oml_core.lightning.pipelines.shared.training import scheduler_args
from oml_core.registry import ConfigError, Registry
from oml_core.registry.kinds import ComponentOf, component_of
from tests.scripts.tiny_training import tiny_config

REGISTRY = Registry(load_entrypoints=False)
#: cos(pi / 4) = sqrt(2) / 2: the cosine factors at a quarter and three quarters of the decay.
HALF_SQRT2 = math.sqrt(2) / 2


def _optimizer(lr: float = 1.0) -> torch.optim.Optimizer:
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=lr)


def _factors(function, epochs):
    return [function(epoch) for epoch in epochs]


@pytest.mark.parametrize(
    "function, epochs, expected",
    [
        (constant(), [0, 1, 5, 100], [1, 1, 1, 1]),
        # s + (1 - s) * e / w for e < w, then 1
        (linear_warmup(4, 0.2), [0, 1, 2, 3, 4, 10], [0.2, 0.4, 0.6, 0.8, 1, 1]),
        (linear_warmup(), [0, 1, 4, 5, 6], [0.1, 0.28, 0.82, 1, 1]),  # warmup_epochs 5, start_factor 0.1
        (linear_warmup(0, 0.5), [0, 1], [1, 1]),
        (linear_warmup(2, 0.0), [0, 1, 2], [0, 0.5, 1]),
        # (1 + cos(pi * e / T)) / 2, then 0
        (cosine(4), [0, 1, 2, 3, 4, 5], [1, (1 + HALF_SQRT2) / 2, 0.5, (1 - HALF_SQRT2) / 2, 0, 0]),
        # warm-up 0.5, 0.75 over 2 epochs, then 0.1 + 0.9 * (1 + cos(pi * (e - 2) / 4)) / 2
        (
            cosine(total_epochs=6, min_factor=0.1, warmup_epochs=2, start_factor=0.5),
            [0, 1, 2, 3, 4, 5, 6, 9],
            [
                0.5,
                0.75,
                1,
                0.1 + 0.9 * (1 + HALF_SQRT2) / 2,
                0.55,
                0.1 + 0.9 * (1 - HALF_SQRT2) / 2,
                0.1,
                0.1,
            ],
        ),
        (cosine(), [0, 50, 100, 150], [1, 0.5, 0, 0]),  # total_epochs 100, min_factor 0
        # gamma ** (e // step_size)
        (step(2, 0.5), [0, 1, 2, 3, 4, 7], [1, 1, 0.5, 0.5, 0.25, 0.125]),
        (step(3, 10.0), [2, 3, 6], [1, 10, 100]),
        (step(), [9, 10, 25], [1, 0.1, 0.01]),  # step_size 10, gamma 0.1
    ],
)
def test_the_factors_are_the_formulas(function, epochs, expected):
    assert _factors(function, epochs) == pytest.approx(expected, abs=1e-12)
    assert all(type(f) is float for f in _factors(function, epochs))


@pytest.mark.parametrize(
    "factory, args, message",
    [
        (linear_warmup, {"warmup_epochs": -1}, "warmup_epochs must be an integer >= 0, got -1"),
        (linear_warmup, {"warmup_epochs": 2.5}, "warmup_epochs must be an integer >= 0, got 2.5"),
        (linear_warmup, {"warmup_epochs": True}, "warmup_epochs must be an integer >= 0, got True"),
        (linear_warmup, {"start_factor": 1.5}, r"start_factor must be a number in \[0, 1\], got 1.5"),
        (linear_warmup, {"start_factor": "x"}, r"start_factor must be a number in \[0, 1\], got 'x'"),
        (cosine, {"total_epochs": 2, "warmup_epochs": 2}, "total_epochs must be an integer >= 3, got 2"),
        (cosine, {"total_epochs": 0}, "total_epochs must be a positive integer, got 0"),
        (cosine, {"min_factor": -0.1}, r"min_factor must be a number in \[0, 1\], got -0.1"),
        (cosine, {"min_factor": math.nan}, r"min_factor must be a number in \[0, 1\], got nan"),
        (step, {"step_size": 0}, "step_size must be a positive integer, got 0"),
        (step, {"gamma": 0}, "gamma must be a number > 0, got 0"),
        (step, {"gamma": math.inf}, "gamma must be a number > 0, got inf"),
    ],
)
def test_a_bad_argument_is_named(factory, args, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        factory(**args)


def test_the_registry_has_them_with_default_configs_that_build():
    assert REGISTRY.names("lr_function") == ["constant", "cosine", "linear_warmup", "step"]
    assert REGISTRY.default_config("lr_function", "linear_warmup") == {
        "name": "linear_warmup",
        "args": {"warmup_epochs": 5, "start_factor": 0.1},
    }
    for name in REGISTRY.names("lr_function"):
        spec = REGISTRY.default_config("lr_function", name)
        function = REGISTRY.build("lr_function", spec)
        assert function(0) == pytest.approx(0.1 if name == "linear_warmup" else 1.0)
    assert REGISTRY.describe("lr_function", "cosine")["signature"] == (
        "(total_epochs: int = 100, min_factor: float = 0.0, warmup_epochs: int = 0, start_factor: float = 0.1) "
        "-> collections.abc.Callable[[int], float]"
    )
    # the lambda scheduler's default config: the constant factor, as a spec (so that .name= switches it)
    assert REGISTRY.default_config("scheduler", "lambda") == {
        "name": "lambda",
        "args": {"lr_lambda": {"name": "constant", "args": {}}},
    }


def test_oml_registry_lists_the_kind(capsys):
    assert main(["registry", "lr_function"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ("constant", "linear_warmup", "cosine", "step"))


@pytest.mark.parametrize(
    "lr_lambda",
    [
        {"name": "step", "args": {"step_size": 2, "gamma": 0.5}},  # a nested spec
        "oml_core:step",  # a qualified name (the core's plugin): its default arguments would be 10, 0.1
    ],
)
def test_the_lambda_scheduler_builds_its_lr_lambda_through_the_registry(lr_lambda):
    scheduler = REGISTRY.build(
        "scheduler", {"name": "lambda", "args": {"lr_lambda": lr_lambda}}, optimizer=_optimizer()
    )
    assert isinstance(scheduler, LambdaLR)
    lrs = []
    for _ in range(5):
        lrs.append(scheduler.optimizer.param_groups[0]["lr"])
        scheduler.optimizer.step()
        scheduler.step()
    expected = [1, 1, 0.5, 0.5, 0.25] if isinstance(lr_lambda, dict) else [1, 1, 1, 1, 1]
    assert lrs == pytest.approx(expected)
    assert scheduler.state_dict()["lr_lambdas"] == [None]  # a checkpoint never holds the function


def test_a_bad_lr_function_argument_is_one_line_naming_the_scheduling_key():
    scheduling = SchedulingConfig(
        scheduler=ComponentSpec("lambda", {"lr_lambda": {"name": "step", "args": {"step_size": 0}}})
    )
    with pytest.raises(ConfigError) as error:
        scheduler_args(scheduling, REGISTRY, _optimizer(), "extractor_training_pipeline")
    assert str(error.value) == (
        "extractor_training_pipeline: config key 'scheduling.scheduler' ('lambda'): "
        "step_size must be a positive integer, got 0"
    )


def test_lambda_lr_in_library_use_takes_a_python_callable_and_refuses_a_name():
    scheduler = lambda_lr(_optimizer(0.5), lambda epoch: 0.5**epoch)
    scheduler.optimizer.step()
    scheduler.step()
    assert scheduler.get_last_lr() == pytest.approx([0.25])
    with pytest.raises(
        TypeError, match="^lr_lambda must be a callable f\\(epoch\\) -> factor, got 'cosine'; "
    ):
        lambda_lr(_optimizer(), "cosine")


def test_component_of_is_read_from_annotated_alone_or_in_a_union():
    assert component_of(Annotated[int, ComponentOf("lr_function")]) == "lr_function"
    assert component_of(Optional[Annotated[int, "other", ComponentOf("loss")]]) == "loss"  # noqa: UP045
    assert component_of(Annotated[int, ComponentOf("miner")] | None) == "miner"
    assert component_of(Annotated[int, "no kind"]) is None
    assert component_of(int) is None and component_of(None) is None


@pytest.mark.slow
def test_a_training_run_steps_the_optimizer_by_linear_warmup(tmp_path, oml_cache_dir, monkeypatch):
    """``lr_lambda: {name: linear_warmup, args: {warmup_epochs: 2, start_factor: 0.25}}`` stepped every epoch:
    the optimizer's learning rate is 0.02 * (0.25, 0.625, 1, 1) in epochs 0 to 3, read from the scheduler after
    each of its steps (its first at construction)."""
    from oml_core.lightning.pipelines import extractor_training_pipeline

    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    read: list[tuple[int, float]] = []
    real_step = LambdaLR.step

    def reading_step(self: LambdaLR, *args, **kwargs) -> None:
        real_step(self, *args, **kwargs)
        read.append((self.last_epoch, self.optimizer.param_groups[0]["lr"]))

    monkeypatch.setattr(LambdaLR, "step", reading_step)
    scheduling = {
        "scheduler": {
            "name": "lambda",
            "args": {
                "lr_lambda": {"name": "linear_warmup", "args": {"warmup_epochs": 2, "start_factor": 0.25}}
            },
        },
        "scheduler_interval": "epoch",
    }
    cfg = tiny_config(tmp_path, max_epochs=3, scheduling=scheduling, validate_before_training=False)
    result = extractor_training_pipeline(cfg, registry=Registry())
    assert sorted(result.epochs) == [1, 2, 3]
    assert [epoch for epoch, _ in read] == [0, 1, 2, 3]
    assert [lr for _, lr in read] == pytest.approx([0.02 * 0.25, 0.02 * 0.625, 0.02, 0.02])
    state = torch.load(result.last_checkpoint, map_location="cpu", weights_only=True)
    (scheduler_state,) = state["lr_schedulers"]
    assert scheduler_state["last_epoch"] == 3 and scheduler_state["_last_lr"] == pytest.approx([0.02])

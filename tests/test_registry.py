"""Registry unit tests on fresh plugin managers with in-test plugins (no entry points loaded)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from oml_core import hookimpl
from oml_core.interfaces.miners import ITripletsMiner
from oml_core.registry import (
    SELF_BUILT_ARGS_ATTR,
    AmbiguousNameError,
    ConfigError,
    DuplicateRegistrationError,
    InterfaceError,
    MissingArgumentError,
    PluginLoadError,
    PluginWarning,
    Registry,
    UnexpectedArgumentError,
    UnknownNameError,
)


class FakeMiner(ITripletsMiner):
    def __init__(self, k: int = 1):
        self.k = k

    def sample(self, features, labels):
        return features, features, features


class FakeLoss(nn.Module):
    def __init__(self, margin: float, miner: ITripletsMiner | None = None, reduction: str = "mean"):
        super().__init__()
        self.margin, self.miner, self.reduction = margin, miner, reduction


class HoldsAnnotatedMiner(nn.Module):
    def __init__(self, picker: ITripletsMiner):
        super().__init__()
        self.picker = picker


class PluginA:
    @hookimpl
    def oml_register_losses(self, register):
        register("fake", FakeLoss, aliases=("fake_alias",), description="a fake loss")
        register("annotated", HoldsAnnotatedMiner)

    @hookimpl
    def oml_register_miners(self, register):
        register("fake_miner", FakeMiner)


class PluginB:
    @hookimpl
    def oml_register_losses(self, register):
        register("fake", "torch.nn:MSELoss")


def make(*plugins) -> Registry:
    return Registry(list(plugins), load_entrypoints=False)


def test_builtins_are_registered_through_hooks():
    registry = make()
    assert {"sgd", "adam", "adamw"} <= set(registry.names("optimizer"))
    assert {"step", "multi_step", "cosine_annealing"} <= set(registry.names("scheduler"))
    assert registry.names("retrieval_metric") == [
        "cmc",
        "fallout",
        "map",
        "map_r",
        "mrr",
        "ndcg",
        "precision",
        "precision_classic",
        "recall",
    ]
    assert registry.names("postprocessor") == ["adaptive_thresholding", "constant_thresholding"]
    assert [r.info.name for r in registry.plugins()] == ["oml_core"]
    assert registry.config_dirs() == ["pkg://oml_core.configs"]
    assert registry.get("optimizer", "adam").plugin.distribution == "oml-core"


def test_build_nested_spec_by_argument_name_and_alias():
    registry = make(("plugin_a", PluginA()))
    loss = registry.build(
        "loss",
        {"name": "fake_alias", "args": {"margin": 0.3, "miner": {"name": "fake_miner", "args": {"k": 7}}}},
    )
    assert isinstance(loss, FakeLoss) and loss.margin == 0.3
    assert isinstance(loss.miner, FakeMiner) and loss.miner.k == 7


def test_build_nested_spec_by_annotation():
    registry = make(("plugin_a", PluginA()))
    built = registry.build("loss", {"name": "annotated", "args": {"picker": {"name": "fake_miner"}}})
    assert isinstance(built.picker, FakeMiner) and built.picker.k == 1


def test_build_accepts_dictconfig_and_runtime_arguments():
    from omegaconf import OmegaConf

    registry = make()
    params = [nn.Parameter(torch.zeros(3))]
    optimizer = registry.build(
        "optimizer", OmegaConf.create({"name": "sgd", "args": {"lr": 0.5}}), params=params
    )
    assert isinstance(optimizer, torch.optim.SGD) and optimizer.param_groups[0]["lr"] == 0.5
    scheduler = registry.build("scheduler", {"name": "step", "args": {"step_size": 2}}, optimizer=optimizer)
    assert isinstance(scheduler, torch.optim.lr_scheduler.StepLR) and scheduler.step_size == 2


def test_unknown_name_lists_close_matches_known_names_and_hint():
    registry = make(("plugin_a", PluginA()))
    with pytest.raises(UnknownNameError) as info:
        registry.build("loss", {"name": "fak", "args": {}})
    message = str(info.value)
    assert "Unknown loss 'fak'" in message
    assert "Did you mean: fake" in message
    assert "Known loss names: annotated, fake, fake_alias." in message
    assert "oml plugins" in message


def test_unknown_first_party_name_names_its_distribution():
    with pytest.raises(
        UnknownNameError, match=r"'triplet_with_miner' is provided by the plugin distribution 'oml-losses'"
    ):
        make().get("loss", "triplet_with_miner")


def test_conflicting_names_are_never_silently_resolved():
    registry = Registry([("plugin_a", PluginA()), ("plugin_b", PluginB())], load_entrypoints=False)
    with pytest.raises(AmbiguousNameError) as info:
        registry.get("loss", "fake")
    message = str(info.value)
    assert "plugin_a:fake" in message and "plugin_b:fake" in message
    assert isinstance(registry.build("loss", {"name": "plugin_b:fake"}), nn.MSELoss)
    assert isinstance(registry.build("loss", {"name": "plugin_a:fake", "args": {"margin": 1.0}}), FakeLoss)
    assert registry.get("loss", "plugin_a:fake_alias").name == "fake"


def test_unexpected_argument_lists_accepted_ones():
    registry = make(("plugin_a", PluginA()))
    with pytest.raises(UnexpectedArgumentError, match=r"\['marjin'\]; it accepts: margin, miner, reduction"):
        registry.build("loss", {"name": "fake", "args": {"marjin": 0.1}})


def test_missing_argument_is_named():
    with pytest.raises(MissingArgumentError, match=r"\['margin'\]"):
        make(("plugin_a", PluginA())).build("loss", {"name": "fake", "args": {}})


def test_malformed_specs():
    registry = make(("plugin_a", PluginA()))
    with pytest.raises(ConfigError, match="unknown keys \\['arg'\\]"):
        registry.build("loss", {"name": "fake", "arg": {}})
    with pytest.raises(ConfigError, match="string 'name'"):
        registry.build("loss", {"args": {}})
    with pytest.raises(ConfigError, match="set by the pipeline at run time"):
        registry.build("optimizer", {"name": "sgd", "args": {"params": []}}, params=[])


def test_unresolvable_nested_spec_is_an_error():
    class Opaque(nn.Module):
        def __init__(self, thing):
            super().__init__()

    class Plugin:
        @hookimpl
        def oml_register_losses(self, register):
            register("opaque", Opaque)

    with pytest.raises(ConfigError, match="argument 'thing' is a \\{name, args\\} spec"):
        make(Plugin()).build("loss", {"name": "opaque", "args": {"thing": {"name": "x"}}})


def test_interface_is_checked_on_registration_and_on_build():
    class NotAMiner:
        pass

    class BadClass:
        @hookimpl
        def oml_register_miners(self, register):
            register("bad", NotAMiner)

    with pytest.warns(PluginWarning, match="does not implement oml_core.interfaces.miners.ITripletsMiner"):
        registry = make(("bad_class", BadClass()))
        assert registry.names("miner") == []

    class BadProduct:
        @hookimpl
        def oml_register_miners(self, register):
            register("bad", lambda: object())

    with pytest.raises(InterfaceError, match="built a object"):
        make(("bad_product", BadProduct())).build("miner", "bad")


def test_failing_hook_is_skipped_with_warning_or_raises_when_strict():
    class Broken:
        @hookimpl
        def oml_register_losses(self, register):
            raise RuntimeError("boom")

    with pytest.warns(
        PluginWarning, match=r"oml plugin broken: hook oml_register_losses failed: RuntimeError: boom"
    ):
        registry = make(("broken", Broken()), ("plugin_a", PluginA()))
        assert registry.names("loss") == ["annotated", "fake"]
    assert [r.error is not None for r in registry.plugins()] == [False, True, False]
    with pytest.raises(PluginLoadError, match="boom"):
        Registry([("broken", Broken())], load_entrypoints=False, strict=True).names("loss")


def test_unknown_hook_name_is_rejected():
    class Typo:
        @hookimpl
        def oml_register_lossess(self, register):
            pass

    with pytest.warns(PluginWarning, match="invalid plugin"):
        registry = make(("typo", Typo()))
    assert registry.plugins()[-1].error is not None


def test_lazy_factory_that_fails_to_import_names_plugin():
    class Lazy:
        @hookimpl
        def oml_register_losses(self, register):
            register("ghost", "not_a_module_xyz:Thing")

    registry = make(("lazy", Lazy()))
    assert registry.names("loss") == ["ghost"]
    with pytest.raises(PluginLoadError, match="loss 'ghost' of plugin lazy cannot be imported"):
        registry.build("loss", "ghost")
    assert "<unavailable: PluginLoadError" in registry.describe("loss", "ghost")["signature"]


def test_duplicate_registration_inside_one_plugin():
    class Twice:
        @hookimpl
        def oml_register_losses(self, register):
            register("x", FakeLoss)
            register("x", FakeLoss)

    with pytest.raises(PluginLoadError, match="registers loss 'x' twice"):
        Registry([("twice", Twice())], load_entrypoints=False, strict=True).names("loss")
    assert issubclass(DuplicateRegistrationError, ValueError)


def test_describe_reports_provider_and_signature():
    info = make(("plugin_a", PluginA())).describe("loss", "fake")
    assert info["plugin"] == "plugin_a" and info["qualified_name"] == "plugin_a:fake"
    assert info["aliases"] == ["fake_alias"] and info["description"] == "a fake loss"
    assert info["signature"].startswith("(margin: float, miner: ")
    assert info["factory"].endswith(":FakeLoss")


def test_registries_do_not_share_state():
    first, second = make(("plugin_a", PluginA())), make()
    assert "fake" in first.names("loss") and second.names("loss") == []


def test_default_config_from_a_plugin_config_dir(tmp_path):
    (tmp_path / "loss").mkdir()
    (tmp_path / "loss" / "fake.yaml").write_text("name: fake\nargs:\n  margin: 0.3\n")
    (tmp_path / "loss" / "broken.yaml").write_text("name: other\nargs: {}\n")

    class WithConfigs(PluginA):
        @hookimpl
        def oml_register_config_dirs(self, register):
            register(f"file://{tmp_path}")

    registry = make(WithConfigs())
    spec = registry.default_config("loss", "fake")
    assert spec == {"name": "fake", "args": {"margin": 0.3}}
    assert registry.build("loss", spec).margin == 0.3
    assert registry.default_config("loss", "annotated") is None  # no file: no default
    assert registry.default_config("transforms", "norm_resize") == {
        "name": "norm_resize",
        "args": {"im_size": 224},
    }
    with pytest.raises(ConfigError, match=r"broken\.yaml: a default config must be a mapping \{name: broken"):
        registry.default_config("loss", "broken")
    with pytest.raises(KeyError, match="Unknown kind 'lossez'"):
        registry.default_config("lossez", "fake")


class DistanceLoss(nn.Module):
    """A loss whose ``distance`` argument is no oml kind (another library's component)."""

    def __init__(self, distance=None):
        super().__init__()
        self.distance = distance


def test_a_factory_builds_the_specs_of_the_arguments_it_names_itself():
    def builds_its_distance(distance=None):
        return DistanceLoss(distance)

    setattr(builds_its_distance, SELF_BUILT_ARGS_ATTR, frozenset({"distance"}))

    class Plugin:
        @hookimpl
        def oml_register_losses(self, register):
            register("self_built", builds_its_distance)
            register("plain", DistanceLoss)

    registry = make(Plugin())
    spec = {"name": "cosine", "args": {"eps": 0.1}}
    assert registry.build("loss", {"name": "self_built", "args": {"distance": spec}}).distance == spec
    with pytest.raises(
        ConfigError, match="argument 'distance' is a {name, args} spec but its kind cannot be told"
    ):
        registry.build("loss", {"name": "plain", "args": {"distance": spec}})

"""What ``--show-config`` prints (``oml train|validate|... --show-config``, ``oml index build --show-config``): the
config as the command would run it, as commented yaml."""

from __future__ import annotations

from typing import Any, cast

from oml_core.config.compose import unresolvable_config_error


def config_yaml(cfg: Any, pipeline: str) -> str:
    """The composed config ``cfg`` of ``pipeline`` as yaml, its interpolations resolved, without the primary
    config's ``hydra:`` section (hydra's settings, which the pipelines do not read), each key of the pipeline's
    schema preceded by its doc as ``#`` comments (:func:`~oml_core.config.reference.commented_yaml`).

    Raises:
        ConfigError: an interpolation does not resolve (one line: the key and omegaconf's reason).
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from oml_core.config.reference import commented_yaml

    try:
        masked = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
        values = OmegaConf.to_container(masked, resolve=True, enum_to_str=True)
    except OmegaConfBaseException as e:
        raise unresolvable_config_error(e) from e
    return commented_yaml(cast(dict[str, Any], values), pipeline)


__all__ = ["config_yaml"]

"""Turning a pipeline's config (a ``DictConfig`` or a dict) into YAML text, shared by the loggers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

#: File name under which loggers store the pipeline's config.
CONFIG_FILE_NAME = "config.yaml"


def _plain(obj: Any) -> Any:
    """A copy of ``obj`` that YAML can hold: containers kept, scalars kept, anything else as ``str``."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, Sequence) and not isinstance(obj, (str, bytes)):
        return [_plain(v) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return str(obj)


def cfg_to_yaml(cfg: DictConfig | ListConfig | Mapping[str, Any] | Any) -> str:
    """The YAML text of ``cfg``.

    A ``DictConfig``/``ListConfig`` is dumped with ``OmegaConf.to_yaml`` with its interpolations resolved
    (unresolved where resolving fails, e.g. a missing environment variable); a plain dict goes through
    ``OmegaConf.create`` the same way; values OmegaConf cannot hold (tensors, arbitrary objects) are
    written as their ``str``. ``OmegaConf.create(yaml_text)`` gives back an equal config.
    """
    if not isinstance(cfg, (DictConfig, ListConfig)):
        try:
            cfg = OmegaConf.create(cfg)  # type: ignore[arg-type]
        except (OmegaConfBaseException, ValueError, TypeError):
            cfg = OmegaConf.create(_plain(cfg))
    try:
        return OmegaConf.to_yaml(cfg, resolve=True)
    except OmegaConfBaseException:
        return OmegaConf.to_yaml(cfg, resolve=False)


__all__ = ["CONFIG_FILE_NAME", "cfg_to_yaml"]

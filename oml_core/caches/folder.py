"""The user cache folder of oml (the mock datasets, the pretrained weights)."""

from __future__ import annotations

import os
from pathlib import Path


def get_cache_dir() -> Path:
    """``$OML_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/oml``, else ``~/.cache/oml`` (not created here)."""
    if os.environ.get("OML_CACHE_DIR"):
        return Path(os.environ["OML_CACHE_DIR"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "oml"
    return Path.home() / ".cache" / "oml"


def weights_cache_dir() -> Path:
    """Where zoo checkpoints are kept: ``$OML_WEIGHTS_DIR`` if set, else ``<oml cache dir>/weights``
    (:func:`get_cache_dir`)."""
    if os.environ.get("OML_WEIGHTS_DIR"):
        return Path(os.environ["OML_WEIGHTS_DIR"]).expanduser()
    return get_cache_dir() / "weights"


__all__ = ["get_cache_dir", "weights_cache_dir"]

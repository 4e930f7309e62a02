"""What ties a saved gallery index to the model that embedded it, and the checks of it at load and search.

- The weights: the extractor's state dict as it embedded the gallery is copied into the index (``weights.pt``),
  its sha256 kept in ``index.json``; the extractor is rebuilt from its spec with every ``weights`` argument
  null (:func:`rebuilt_spec`) and that state dict loaded strictly. Nothing outside the folder is read.
- The model JSON (:func:`model_json`): the canonical JSON (sorted keys, no spaces) of the extractor spec (its
  ``weights`` arguments null: the digest stands for them), the sha256 of ``weights.pt``, the transforms spec,
  the distance and the dataset component's spec (when the index has one), kept in ``embeddings.pt`` at build
  time; at load it is computed again from ``index.json`` and must be the same (:func:`check_model`), else the
  first key that differs is named.
- The probe (:func:`check_probe`): an item and its embedding at build time, kept in the folder: the fixed query
  that the dataset component writes (images: the picture ``probe.png``), or, for a component that writes none,
  the input tensor of the first gallery item (in ``embeddings.pt``). Before the first query is embedded, the
  extractor and transforms in use (rebuilt from the folder, or objects given at load) embed it again (a query
  through the component), and it must be within :data:`PROBE_TOLERANCE`:
  ``||e_now - e_built||_2 <= PROBE_TOLERANCE * ||e_built||_2``. That catches any silent change of model (and,
  with a probe query, of transforms and reading): an edited spec, another version of a plugin, another object.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from oml_core.index.errors import GalleryIndexError
from oml_core.io.provenance import spec_without_weights as rebuilt_spec

#: The largest distance, relative to its norm, between the probe's embedding at search and at build time.
PROBE_TOLERANCE = 1e-3
#: How a key that one side lacks is shown.
_ABSENT = "(absent)"
#: What ends every message of a model that does not match its index.
_REBUILD = "rebuild the index (oml index build)"


def model_json(
    extractor: Any, transforms: Any, distance: Any, weights_sha256: str | None, dataset: Any = None
) -> str:
    """The canonical JSON (sorted keys, no spaces) of what defines an index's embeddings: the extractor spec
    (:func:`rebuilt_spec`), the sha256 of its weights, the transforms spec, the distance and, when not None, the
    dataset component's spec (None: the default images, as in an index written before it was recorded).

    Raises:
        GalleryIndexError: a spec that is not JSON values.
    """
    model = {
        "extractor": rebuilt_spec(extractor),
        "weights_sha256": weights_sha256,
        "transforms": transforms,
        "distance": distance,
    }
    if dataset is not None:
        model["dataset"] = dataset
    try:
        return json.dumps(model, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise GalleryIndexError(f"the index's config is not JSON values: {e}") from e


def check_model(built_with: str, configured: str, index_file: Path, embeddings_file: Path) -> None:
    """Check that the model JSON of ``index_file`` (``configured``) is the one its embeddings were built with
    (``built_with``, kept in ``embeddings_file``).

    Raises:
        GalleryIndexError: they differ; the message names the first key that differs and both values.
    """
    if built_with == configured:
        return
    try:
        difference = first_difference(json.loads(built_with), json.loads(configured))
    except json.JSONDecodeError as e:
        raise GalleryIndexError(f"{embeddings_file}: its model JSON is not JSON ({e})") from e
    key, built, now = difference if difference is not None else ("model", built_with, configured)
    raise GalleryIndexError(
        f"{index_file}: its {key} is {now!r}, the embeddings of {embeddings_file.name} were built with {built!r}: "
        f"the index's config no longer matches what built its embeddings; {_REBUILD}"
    )


def first_difference(built: Any, now: Any, key: str = "") -> tuple[str, Any, Any] | None:
    """The first place where two JSON values differ, as ``(dotted key, built value, now value)`` (a key one
    side lacks shows as ``(absent)``), or None when they are equal."""
    if isinstance(built, dict) and isinstance(now, dict):
        for name in sorted(set(built) | set(now)):
            inner = f"{key}.{name}" if key else str(name)
            if name not in built or name not in now:
                return inner, built.get(name, _ABSENT), now.get(name, _ABSENT)
            found = first_difference(built[name], now[name], inner)
            if found is not None:
                return found
        return None
    if isinstance(built, list) and isinstance(now, list) and len(built) == len(now):
        for position, (a, b) in enumerate(zip(built, now)):
            found = first_difference(a, b, f"{key}[{position}]")
            if found is not None:
                return found
        return None
    return None if built == now else (key or "model", built, now)


def probe_distance(built: Tensor, now: Tensor) -> float:
    """How far the probe's embedding ``now`` is from ``built``, relative to its norm:
    ``||now - built||_2 / ||built||_2`` (float32, flattened); ``inf`` for another number of values."""
    now, built = now.detach().float().cpu().reshape(-1), built.detach().float().cpu().reshape(-1)
    if now.shape != built.shape:
        return float("inf")
    scale = float(torch.linalg.vector_norm(built))
    return float(torch.linalg.vector_norm(now - built)) / max(scale, torch.finfo(torch.float32).tiny)


def check_probe(built: Tensor, now: Tensor, probe_file: Path | str) -> None:
    """Check that the probe embeds to ``now`` within :data:`PROBE_TOLERANCE` of ``built``, its embedding at build
    time: ``||now - built||_2 <= PROBE_TOLERANCE * ||built||_2``.

    Args:
        built: The probe's embedding at build time.
        now: Its embedding by the extractor in use.
        probe_file: Names the probe in the messages (its file).

    Raises:
        GalleryIndexError: another dimension, or further away; the message names the probe file.
    """
    if now.numel() != built.numel():
        raise GalleryIndexError(
            f"{probe_file}: the index's extractor embeds it into dimension {now.numel()}, the index was built with "
            f"dimension {built.numel()}: it is not the model that built the index; {_REBUILD}"
        )
    relative = probe_distance(built, now)
    if not relative <= PROBE_TOLERANCE:
        raise GalleryIndexError(
            f"{probe_file}: the index's extractor and transforms embed it {relative:.3g} away (relative L2) from "
            f"its embedding at build time (tolerance {PROBE_TOLERANCE:g}): they are not the model that built the "
            f"index; {_REBUILD}, or give the extractor and transforms it was built with"
        )


__all__ = [
    "PROBE_TOLERANCE",
    "check_model",
    "check_probe",
    "first_difference",
    "model_json",
    "probe_distance",
    "rebuilt_spec",
]

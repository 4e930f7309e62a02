"""Where embeddings came from: the provenance an embeddings file carries (the extractor spec, the digest of the
weights that embedded, the transforms), how the digest of weights is computed, and the check that a file's
embeddings are those a configured model would give.

The digest of weights (:func:`state_dict_sha256`) is the sha256 of the state dict's tensors themselves (their
names in sorted order, dtypes, shapes and bytes), not of a file: the same weights have the same digest whether
they came from a checkpoint, a zoo key or a seeded random initialisation, on whatever device.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

#: The keys of a provenance as it is stored (JSON in a sidecar, key-value metadata in Parquet).
PROVENANCE_KEYS = ("extractor", "weights_sha256", "transforms")


class EmbeddingsMismatchError(ValueError):
    """An embeddings file whose provenance is not the configured model's: the message names the file, the key
    that differs and both values (for the weights, both digests)."""


def spec_without_weights(spec: Any) -> Any:
    """``spec`` (a ``{name, args}`` spec, as JSON values) with every ``args.weights`` null, its own and those of
    the specs nested in its arguments: what names a model apart from where its weights were read (their digest
    stands for them)."""
    if isinstance(spec, Mapping):
        copy = {key: spec_without_weights(value) for key, value in spec.items()}
        if isinstance(copy.get("args"), dict) and "weights" in copy["args"]:
            copy["args"]["weights"] = None
        return copy
    if isinstance(spec, list):
        return [spec_without_weights(value) for value in spec]
    return spec


def state_dict_sha256(state_dict: Mapping[str, Tensor]) -> str:
    """The sha256 hex digest of a state dict's tensors: for each name in sorted order, the name, the dtype, the
    shape and the bytes of the tensor (on the CPU, contiguous), one tensor at a time."""
    digest = hashlib.sha256()
    for name in sorted(state_dict):
        tensor = state_dict[name].detach().cpu().contiguous()
        digest.update(json.dumps([name, str(tensor.dtype), list(tensor.shape)]).encode("utf-8"))
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class EmbeddingsProvenance:
    """What made the embeddings of a file.

    Attributes:
        extractor: The extractor's ``{name, args}`` spec with its ``weights`` arguments null
            (:func:`spec_without_weights`); None: not recorded.
        weights_sha256: :func:`state_dict_sha256` of the extractor's weights as it embedded; None: not recorded.
        transforms: The transforms' ``{name, args}`` spec (None: none, or not recorded).
    """

    extractor: dict[str, Any] | None
    weights_sha256: str | None
    transforms: dict[str, Any] | None

    @classmethod
    def of_model(
        cls, extractor_spec: Mapping[str, Any], state_dict: Mapping[str, Tensor], transforms_spec: Any
    ) -> EmbeddingsProvenance:
        """The provenance of embeddings by the extractor of ``extractor_spec`` (plain JSON values) whose weights
        are ``state_dict``, with the transforms of ``transforms_spec`` (a plain spec or None)."""
        return cls(
            extractor=spec_without_weights(dict(extractor_spec)),
            weights_sha256=state_dict_sha256(state_dict),
            transforms=None if transforms_spec is None else dict(transforms_spec),
        )

    def to_json(self) -> dict[str, Any]:
        """The provenance as JSON values (the keys :data:`PROVENANCE_KEYS`)."""
        return {
            "extractor": self.extractor,
            "weights_sha256": self.weights_sha256,
            "transforms": self.transforms,
        }

    @classmethod
    def from_json(cls, data: Any) -> EmbeddingsProvenance:
        """The provenance of :meth:`to_json`'s values.

        Raises:
            ValueError: not a mapping of the keys :data:`PROVENANCE_KEYS`, a spec that is not a mapping or null,
                or a digest that is not a sha256 hex digest or null.
        """
        if not isinstance(data, Mapping) or set(data) != set(PROVENANCE_KEYS):
            found = sorted(data) if isinstance(data, Mapping) else type(data).__name__
            raise ValueError(f"the provenance must have the keys {list(PROVENANCE_KEYS)}, got {found}")
        for key in ("extractor", "transforms"):
            if data[key] is not None and not isinstance(data[key], Mapping):
                raise ValueError(
                    f"the provenance's {key} must be a {{name, args}} spec or null, got {data[key]!r}"
                )
        digest = data["weights_sha256"]
        if digest is not None and not (
            isinstance(digest, str) and len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)
        ):
            raise ValueError(
                f"the provenance's weights_sha256 must be a sha256 hex digest or null, got {digest!r}"
            )
        return cls(
            extractor=None if data["extractor"] is None else dict(data["extractor"]),
            weights_sha256=digest,
            transforms=None if data["transforms"] is None else dict(data["transforms"]),
        )


def check_provenance(found: EmbeddingsProvenance | None, expected: EmbeddingsProvenance, file: str) -> None:
    """Check that the embeddings of ``file``, made as ``found`` says, are those the configured model
    (``expected``) gives: the same extractor spec (weights arguments aside), weights digest and transforms.

    Raises:
        EmbeddingsMismatchError: ``file`` records no provenance, or a key differs (the message names the key and
            both values: ``its embeddings were made with weights_sha256 <a>, the configured model's is <b>``).
    """
    if found is None:
        raise EmbeddingsMismatchError(
            f"{file}: records no provenance (which extractor and weights made its embeddings), so it cannot be "
            f"checked against the configured extractor; write it with oml predict or oml index build"
        )
    for key in PROVENANCE_KEYS:
        mine, theirs = found.to_json()[key], expected.to_json()[key]
        if _canonical(mine) != _canonical(theirs):
            raise EmbeddingsMismatchError(
                f"{file}: its embeddings were made with {key} {_shown(mine)}, the configured model's is "
                f"{_shown(theirs)}: they are not the configured model's embeddings ({_MISMATCH_HINTS[key]})"
            )


#: What the configured model changes to take a file's embeddings, by the provenance key that differs.
_MISMATCH_HINTS = {
    "extractor": "configure the extractor that made them",
    "weights_sha256": "configure the weights that made them, e.g. extractor.args.weights=the checkpoint given to "
    "oml predict",
    "transforms": "configure the transforms that made them",
}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else _canonical(value)


__all__ = [
    "PROVENANCE_KEYS",
    "EmbeddingsMismatchError",
    "EmbeddingsProvenance",
    "check_provenance",
    "spec_without_weights",
    "state_dict_sha256",
]

"""Components built from their config specs: :func:`build_component`, with the runtime arguments a pipeline
offers by name to the components whose factories take them, and one line naming the config key, the component and
its plugin when a factory fails."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from oml_core.registry import ConfigError, Registry, RegistryError, to_plain
from oml_core.registry.errors import describe_error
from oml_core.registry.registry import failed_component
from oml_core.utils.checkpoints import CheckpointError
from oml_core.utils.text import one_line
from oml_core.zoo.store import PretrainedDownloadError


def spec_of(value: Any) -> dict[str, Any]:
    """A component spec as a plain ``{name, args}`` dict (a bare name becomes ``{name: value}``)."""
    spec = to_plain(value)
    return {"name": spec} if isinstance(spec, str) else dict(spec)


def build_component(
    registry: Registry,
    kind: str,
    spec: Any,
    key: str,
    pipeline: str,
    /,
    offers: Mapping[str, Callable[[], Any]] | None = None,
    **runtime: Any,
) -> Any:
    """Build the component of the config key ``key`` (e.g. an extractor whose ``args.weights`` is a checkpoint
    path, a zoo key or null), with the ``runtime`` arguments of its factory and the ``offers`` it takes (by
    parameter name, where its ``args`` leave them unset: :meth:`~oml_core.registry.Registry.build`).

    Raises:
        RegistryError: an unknown name or argument (the registry's message).
        ConfigError: the component refuses its arguments: a weights file that does not exist or does not fit,
            zoo weights that cannot be downloaded, a bad argument value; one line naming ``pipeline``, ``key``,
            the component and the cause (the file, for a checkpoint). Any other exception of a component's
            factory (of a nested spec's too): one line naming ``pipeline``, ``key``, the component that raised
            it, the plugin and distribution that registered it, and the error.
    """
    try:
        return registry.build(kind, spec, offers=offers, **runtime)
    except RegistryError:
        raise
    except (FileNotFoundError, CheckpointError, PretrainedDownloadError, ValueError) as e:
        raise ConfigError(f"{pipeline}: config key {key!r} ({spec_of(spec)['name']!r}): {one_line(e)}") from e
    except Exception as e:
        failed = failed_component(e)
        if failed is None:  # not a factory's: a bug of the core
            raise
        raise ConfigError(
            f"{pipeline}: config key {key!r}: the {failed.kind} {failed.name!r} of the plugin "
            f"{failed.plugin.provider} failed to build: {one_line(describe_error(e))}"
        ) from e


__all__ = ["build_component", "spec_of"]

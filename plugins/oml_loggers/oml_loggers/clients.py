"""Access to the optional client libraries of the loggers: lazy imports, credentials, constructor arguments,
and the switches that keep an offline client offline.

The client libraries (mlflow, wandb, neptune, clearml) are optional extras of ``oml-loggers``; each logger
imports its own library only when it is constructed, through :func:`import_client`, so that loading the
plugin imports none of them and a missing one is reported with the extra that installs it.

A logger configured to log locally turns off its client's own reporting (usage telemetry, error reporting)
with :func:`set_offline_environment`, through the client's documented environment variables.

A logger starts its client's run inside :func:`preserved_random_state`, so that logging leaves the training as
the pipeline's seed made it.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from oml_core.utils.rng_state import get_rng_state, set_rng_state

_logger = logging.getLogger(__name__)


class MissingCredentialsError(RuntimeError):
    """An online logging mode was asked for, but the credentials it needs are not in the environment."""


def import_client(module: str, extra: str, logger_name: str) -> ModuleType:
    """Import the client library ``module`` of the logger ``logger_name``.

    Raises:
        ImportError: the library is not installed; the message names the pip extra of ``oml-loggers``.
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(
            f"{logger_name} needs the package {module!r}, which is not installed (or fails to import: {e}). "
            f"Install it with: pip install 'oml-loggers[{extra}]'"
        ) from e


def missing_env(*variables: str) -> list[str]:
    """The names among ``variables`` that are unset or empty in the environment."""
    return [name for name in variables if not os.environ.get(name)]


def require_credentials(logger_name: str, service: str, missing: Iterable[str], offline_hint: str) -> None:
    """Raise :class:`MissingCredentialsError` when ``missing`` (environment variable names) is not empty.

    The message names the logger, the variables to export and how to log offline instead (``offline_hint``).
    """
    missing = list(missing)
    if missing:
        raise MissingCredentialsError(
            f"{logger_name}: logging online to {service} needs the environment variable(s) "
            f"{', '.join(missing)}, which are not set. Export them, or log offline: {offline_hint}"
        )


@contextmanager
def preserved_random_state() -> Iterator[None]:
    """Put the global random generators back as they were before the block: Python's ``random``, NumPy's, torch's
    CPU generator and, when CUDA is available, every CUDA device's (see
    :func:`oml_core.lightning.callbacks.rng.get_rng_state`).

    The clients draw from them when they start a run (MLflow a random run name, Neptune the key of its offline
    folder, ClearML a callback handle), which the pipeline, seeded before it logs its config, would otherwise
    pay for with other augmentations and so other weights.
    """
    state = get_rng_state({})
    try:
        yield
    finally:
        set_rng_state(state, {})


def check_client_kwargs(logger_name: str, function: Callable[..., Any], kwargs: Mapping[str, Any]) -> None:
    """Raise ``TypeError`` for a keyword in ``kwargs`` that ``function`` (the client's run constructor, to
    which the logger passes them on) does not name, at once rather than when the run is created.

    Only named parameters count: the run constructors that take ``**kwargs`` (``neptune.init_run``) take them
    to refuse them."""
    params = [
        name
        for name, p in inspect.signature(function).parameters.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    unexpected = sorted(set(kwargs) - set(params))
    if unexpected:
        name = f"{function.__module__}.{function.__qualname__}"
        raise TypeError(
            f"{logger_name} got unexpected argument(s) {unexpected}; extra arguments go to {name}, which accepts: "
            f"{', '.join(params)}"
        )


def set_offline_environment(logger_name: str, variables: Mapping[str, str]) -> dict[str, str]:
    """Set, for the whole process, each environment variable of ``variables`` that is not set yet.

    A logger calls it when it logs locally, with the variables that turn its client's own network use off
    (telemetry, error reporting), before the client reads them. A variable already in the environment is the
    user's choice and is left as it is, whatever its value; the variables stay set after the logger is done
    (the clients read them at any time, from any thread).

    Returns:
        The variables this call set, with their values.
    """
    added = {name: value for name, value in variables.items() if name not in os.environ}
    os.environ.update(added)
    if added:
        _logger.debug("%s logs offline: set %s", logger_name, ", ".join(f"{k}={v}" for k, v in added.items()))
    return added


__all__ = [
    "MissingCredentialsError",
    "check_client_kwargs",
    "import_client",
    "missing_env",
    "preserved_random_state",
    "require_credentials",
    "set_offline_environment",
]

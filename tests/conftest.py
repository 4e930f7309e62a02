"""Fixtures of the core's tests: an isolated oml cache dir and a runner of the ``oml`` command."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

OML = [sys.executable, "-m", "oml_core.cli"]


@pytest.fixture(scope="session")
def oml_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache dir shared by the session's tests, so that the mock dataset is generated once and the user's
    own cache is never touched."""
    return tmp_path_factory.mktemp("oml_cache")


@pytest.fixture()
def run_oml(oml_cache_dir: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run ``oml ARGS`` in a subprocess with ``OML_CACHE_DIR`` isolated; ``env`` adds or (None) removes vars."""

    def run(
        *args: str, env: dict[str, str | None] | None = None, cwd: Path | None = None, timeout: int = 300
    ):
        full_env = {**os.environ, "OML_CACHE_DIR": str(oml_cache_dir)}
        for key, value in (env or {}).items():
            if value is None:
                full_env.pop(key, None)
            else:
                full_env[key] = value
        return subprocess.run(
            [*OML, *args], capture_output=True, text=True, env=full_env, cwd=cwd, timeout=timeout, check=False
        )

    return run

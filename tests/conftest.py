"""Fixtures of the core's tests: an isolated oml cache dir and a runner of the ``oml`` command."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.scripts.oml_forkserver import OmlForkServer
from tests.scripts.trained_run import TrainedRun, train_tiny


@pytest.fixture(scope="session")
def oml_fork_server() -> Iterator[OmlForkServer]:
    """The fork server of this test process (:mod:`tests.scripts.oml_forkserver`), stopped at the session's end."""
    server = OmlForkServer()
    yield server
    server.close()


@pytest.fixture()
def run_oml(
    oml_cache_dir: Path, oml_fork_server: OmlForkServer
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run ``oml ARGS`` as a program of its own (a process forked from :func:`oml_fork_server`, as ``python -m
    oml_core.cli ARGS`` would run) with ``OML_CACHE_DIR`` isolated; ``env`` adds or (None) removes vars."""

    def run(
        *args: str, env: dict[str, str | None] | None = None, cwd: Path | None = None, timeout: int = 300
    ) -> subprocess.CompletedProcess[str]:
        full_env = {**os.environ, "OML_CACHE_DIR": str(oml_cache_dir)}
        for key, value in (env or {}).items():
            if value is None:
                full_env.pop(key, None)
            else:
                full_env[key] = value
        return oml_fork_server.run(list(args), full_env, cwd, timeout)

    return run


@pytest.fixture(scope="session")
def tiny_trained_run(
    tmp_path_factory: pytest.TempPathFactory, oml_cache_dir: Path, oml_fork_server: OmlForkServer
) -> TrainedRun:
    """One :data:`~tests.scripts.trained_run.TINY_TRAINING` run per test process, shared by the tests that need a
    trained checkpoint to validate, predict or re-rank from (they read its folder and never write to it)."""
    return train_tiny(oml_fork_server, oml_cache_dir, tmp_path_factory.mktemp("tiny_trained_run"))


@pytest.fixture()
def small_tmpfs(tmp_path):
    """A real 1 MiB tmpfs, mounted for the test (root can mount one: this machine and CI run the suite as root);
    where mounting is not permitted, the tests that need a full disk are skipped with mount's reason."""
    mount_point = tmp_path / "tmpfs"
    mount_point.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)], capture_output=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount_point
    subprocess.run(["umount", str(mount_point)], check=True)

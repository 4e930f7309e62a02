"""Test configuration shared by the core's and the plugins' tests.

Sets the environment every test run needs before torch is imported: offline hub look-ups
(``HF_HUB_OFFLINE=1``) and one thread per process (``OMP_NUM_THREADS=1``), which keeps CPU tests
fast and deterministic on small machines. Subprocesses started by tests inherit it. Every test runs with the
test process's own oml cache folder (:func:`oml_cache_dir`) unless it sets another.
"""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"
os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_collection_modifyitems(items: list) -> None:
    """Run the tests marked ``slow`` (end-to-end runs of seconds to a minute) first, each group in its order:
    with two workers, the long ones start early and the short ones fill the gaps, instead of one worker finishing
    a long test alone at the end of the run."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def oml_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The oml cache folder of this test process, never the user's: the mock datasets are generated there once,
    and the plugins' verdicts kept there once (a command checks each plugin once per test process, not once per
    test)."""
    return tmp_path_factory.mktemp("oml_cache")


@pytest.fixture(scope="session", autouse=True)
def oml_cache_of_every_test(oml_cache_dir: Path) -> Iterator[None]:
    """``OML_CACHE_DIR`` is :func:`oml_cache_dir` for every test (and the processes it starts) that sets no other,
    so that no test writes to the user's cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
        yield

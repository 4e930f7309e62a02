"""Test configuration shared by the core's and the plugins' tests.

Sets the environment every test run needs before torch is imported: offline hub look-ups
(``HF_HUB_OFFLINE=1``) and one thread per process (``OMP_NUM_THREADS=1``), which keeps CPU tests
fast and deterministic on small machines. Subprocesses started by tests inherit it.
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"
os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_collection_modifyitems(items: list) -> None:
    """Run the tests marked ``slow`` (end-to-end runs of seconds to a minute) first, each group in its order:
    with two workers, the long ones start early and the short ones fill the gaps, instead of one worker finishing
    a long test alone at the end of the run."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)

"""An index larger than the memory a process may take opens memory-mapped and searches correctly (issue 38, 4).

The limit is real: ``RLIMIT_DATA`` (``ulimit -d``) of a subprocess, set to its data memory after imports plus
less than its embeddings' size; loading the embeddings whole fails under it, opening the saved exact backend
(its embeddings memory-mapped, read-only: not counted) and searching it does not, nor opening the ``faiss_flat``
and ``faiss_ivf`` backends of the same embeddings (their vectors, and the IVF's inverted lists, mapped by faiss)
when oml-faiss is installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from oml_core.interfaces.knn import IKnnIndex
from oml_core.knn.exact import ExactKnnIndex

SCRIPT = Path(__file__).parent / "scripts" / "mapped_search.py"
#: 200k x 128 float32: 100 MiB of embeddings.
N_ITEMS, DIM = 200_000, 128
#: What the subprocess may allocate beyond its imports: less than half its embeddings.
HEADROOM = 48 * 2**20


def search_under_limit(queries: Path, *searches: tuple[str, Path, Path]) -> subprocess.CompletedProcess[str]:
    """``mapped_search.py`` of ``(mode, folder, out)`` searches, 5 neighbours, in one process under the limit."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, str(SCRIPT), str(queries), "5", str(HEADROOM)]
    command += [str(part) for triple in searches for part in triple]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)


def saved_backends(embeddings: torch.Tensor, folder: Path) -> dict[str, IKnnIndex]:
    """The exact backend of ``embeddings`` (ids: multiples of 3) and, with oml-faiss, a ``faiss_flat`` and a
    ``faiss_ivf`` one, each saved into ``folder / <mode and name>``."""
    ids = torch.arange(N_ITEMS) * 3
    backends: dict[str, IKnnIndex] = {"mapped": ExactKnnIndex("l2")}
    try:
        from oml_faiss import FaissFlatIndex, FaissIVFIndex  # an optional plugin
    except ImportError:
        pass
    else:
        backends["faiss:flat"] = FaissFlatIndex("l2")
        backends["faiss:ivf"] = FaissIVFIndex("l2", nlist=16, nprobe=4)
    for name, backend in backends.items():
        backend.add(embeddings, ids=ids)
        backend.save(folder / name.replace(":", "-"))
    return backends


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="RLIMIT_DATA counts mappings so on Linux only"
)
def test_an_index_larger_than_the_memory_limit_opens_mapped_and_searches_exactly(tmp_path):
    generator = torch.Generator().manual_seed(0)
    backends = saved_backends(torch.randn(N_ITEMS, DIM, generator=generator), tmp_path)
    queries = torch.randn(16, DIM, generator=generator)
    torch.save(queries, tmp_path / "queries.pt")

    whole = search_under_limit(tmp_path / "queries.pt", ("whole", tmp_path / "mapped", tmp_path / "whole.pt"))
    assert (whole.returncode, whole.stdout) == (3, "MemoryError\n"), whole.stderr  # the limit is below them
    searches = [
        (name.partition(":")[0], tmp_path / name.replace(":", "-"), tmp_path / f"{name}.pt")
        for name in backends
    ]
    mapped = search_under_limit(tmp_path / "queries.pt", *searches)
    assert mapped.returncode == 0, mapped.stdout + mapped.stderr
    for (name, backend), (_, _, out) in zip(backends.items(), searches, strict=True):
        expected, found = backend.search(queries, 5), torch.load(out, weights_only=True)
        assert torch.equal(found["ids"], expected.ids), name
        if name == "mapped":
            assert torch.allclose(found["distances"], expected.distances)
        else:  # faiss's search in the parent and in the child: the same
            assert torch.equal(found["distances"], expected.distances), name

"""An index larger than the memory a process may take opens memory-mapped and searches correctly (issue 38, 4).

The limit is real: ``RLIMIT_DATA`` (``ulimit -d``) of a subprocess, set to its data memory after imports plus
less than its embeddings' size; loading the embeddings whole fails under it, opening the saved exact backend
(its embeddings memory-mapped, read-only: not counted) and searching it does not.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from oml_core.knn.exact import ExactKnnIndex

SCRIPT = Path(__file__).parent / "scripts" / "mapped_search.py"
#: 200k x 128 float32: 100 MiB of embeddings.
N_ITEMS, DIM = 200_000, 128
#: What the subprocess may allocate beyond its imports: less than half its embeddings.
HEADROOM = 48 * 2**20


def search_under_limit(folder: Path, queries: Path, out: Path, mode: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, str(SCRIPT), str(folder), str(queries), "5", str(out), str(HEADROOM), mode]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="RLIMIT_DATA counts mappings so on Linux only"
)
def test_an_index_larger_than_the_memory_limit_opens_mapped_and_searches_exactly(tmp_path):
    generator = torch.Generator().manual_seed(0)
    embeddings = torch.randn(N_ITEMS, DIM, generator=generator)
    index = ExactKnnIndex("l2")
    index.add(embeddings, ids=torch.arange(N_ITEMS) * 3)
    index.save(tmp_path / "backend")
    queries = torch.randn(16, DIM, generator=generator)
    torch.save(queries, tmp_path / "queries.pt")
    expected = index.search(queries, 5)

    whole = search_under_limit(tmp_path / "backend", tmp_path / "queries.pt", tmp_path / "whole.pt", "whole")
    assert (whole.returncode, whole.stdout) == (3, "MemoryError\n"), whole.stderr  # the limit is below them
    mapped = search_under_limit(
        tmp_path / "backend", tmp_path / "queries.pt", tmp_path / "mapped.pt", "mapped"
    )
    assert mapped.returncode == 0, mapped.stdout + mapped.stderr
    found = torch.load(tmp_path / "mapped.pt", weights_only=True)
    assert torch.equal(found["ids"], expected.ids)
    assert torch.allclose(found["distances"], expected.distances)

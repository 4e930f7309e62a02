"""The oml_postprocessors plugin through the registry: names, default config, nested specs, lazy exports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from oml_models import ConcatSiamese, LinearTrivialDistanceSiamese
from oml_postprocessors import PairwiseReranker
from PIL import Image

from oml_core.datasets import ImageQueryGalleryLabeledDataset
from oml_core.registry import Registry, UnexpectedArgumentError
from oml_core.retrieval import RetrievalResults

POSTPROCESSOR_NAMES = ["pairwise_reranker"]


def test_names_aliases_and_description() -> None:
    registry = Registry()
    assert set(POSTPROCESSOR_NAMES) <= set(registry.names("postprocessor"))
    info = registry.describe("postprocessor", "pairwise_reranker")
    assert info["distribution"] == "oml-postprocessors"
    assert info["factory"] == "oml_postprocessors.reranker:PairwiseReranker"
    assert info["aliases"] == ["pairwise_images", "pairwise_embeddings"]  # OML's registry maps them to it too
    for alias in info["aliases"]:
        assert registry.get("postprocessor", alias).load() is PairwiseReranker


@pytest.mark.parametrize("name", POSTPROCESSOR_NAMES)
def test_every_default_config_builds(name: str) -> None:
    registry = Registry()
    cfg = registry.default_config("postprocessor", name)
    postprocessor = registry.build("postprocessor", cfg)
    assert isinstance(postprocessor, PairwiseReranker)
    assert isinstance(postprocessor.model, ConcatSiamese)
    assert (postprocessor.top_n, postprocessor.num_workers, postprocessor.batch_size) == (5, 0, 128)


def image_dataset(folder: Path) -> ImageQueryGalleryLabeledDataset:
    rng = np.random.default_rng(0)
    paths = []
    for i in range(4):
        paths.append(folder / f"{i}.png")
        Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(paths[-1])
    df = pd.DataFrame({"label": [0, 0, 1, 1], "path": paths, "is_query": True, "is_gallery": True})
    return ImageQueryGalleryLabeledDataset(df)


def test_the_default_reranker_scores_image_pairs_with_its_siamese(tmp_path: Path) -> None:
    registry = Registry()
    postprocessor = registry.build(
        "postprocessor", registry.default_config("postprocessor", "pairwise_reranker")
    )
    dataset = image_dataset(tmp_path)
    rr = RetrievalResults.from_embeddings(
        torch.randn(4, 3, generator=torch.Generator().manual_seed(0)), dataset
    )
    rr_upd = postprocessor.process(rr, dataset)
    model = postprocessor.model.eval()
    for q in range(4):  # top_n=5 covers the 3 retrieved items: the distances are the siamese's probabilities
        ids = rr.retrieved_ids[q]
        with torch.no_grad():
            images = torch.stack([dataset[int(j)]["input_tensors"] for j in ids])
            probs = model.predict(dataset[q]["input_tensors"].expand_as(images), images)
        expected, order = probs.sort(stable=True)
        assert rr_upd.retrieved_ids[q].tolist() == ids[order].tolist()
        assert torch.allclose(rr_upd.distances[q], expected, atol=1e-5)


def test_nested_pairwise_model_spec_and_aliases_build() -> None:
    registry = Registry()
    cfg = {
        "name": "pairwise_embeddings",
        "args": {
            "top_n": 3,
            "num_workers": 0,
            "batch_size": 16,
            "pairwise_model": {"name": "linear_siamese", "args": {"feat_dim": 4, "identity_init": True}},
        },
    }
    postprocessor = registry.build("postprocessor", cfg)
    assert isinstance(postprocessor, PairwiseReranker) and postprocessor.top_n == 3
    assert isinstance(postprocessor.model, LinearTrivialDistanceSiamese)
    assert torch.equal(postprocessor.model.proj.weight, torch.eye(4))


def test_old_distance_matrix_keys_are_refused_by_name() -> None:
    cfg = {
        "name": "pairwise_images",
        "args": {
            "top_n": 3,
            "num_workers": 0,
            "batch_size": 16,
            "transforms": None,
            "pairwise_model": {"name": "linear_siamese", "args": {"feat_dim": 4, "identity_init": True}},
        },
    }
    with pytest.raises(UnexpectedArgumentError, match=r"unexpected argument\(s\) \['transforms'\]"):
        Registry().build("postprocessor", cfg)


def test_plugin_module_imports_no_postprocessor_module() -> None:
    code = (
        "import sys, oml_postprocessors.plugin; "
        "print(sorted(m for m in sys.modules if m.startswith('oml_postprocessors.') "
        "and m != 'oml_postprocessors.plugin'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_every_export_resolves() -> None:
    import oml_postprocessors

    for name in oml_postprocessors.__all__:
        value = getattr(oml_postprocessors, name)
        assert value.__name__ == name and value.__module__.startswith("oml_postprocessors.")
    assert set(oml_postprocessors.__all__) <= set(dir(oml_postprocessors))

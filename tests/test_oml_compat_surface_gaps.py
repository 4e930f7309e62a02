"""OML 4.0's public names that benchmarks/oml_suite/surface.py found missing, at OML's paths under oml_core, each
on a case computed by hand: the registry views, the dataframe and pairs datasets, the interfaces, the helpers."""

from __future__ import annotations

import importlib
import inspect
import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from oml_core.datasets.dataframe_format import DataFrameFormatError
from oml_core.interfaces.datasets import IBaseDataset


def oml_name(module: str, name: str) -> Any:
    """``name`` of ``oml_core.<module>``, imported as OML's code does (``from oml.<module> import name``)."""
    return getattr(importlib.import_module(f"oml_core.{module}"), name)


class Letters(IBaseDataset):
    """A base dataset of the letters ``a, b, c, ...``: item ``i`` is ``{input_tensors: tensor([i]), idx: i}``."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.extra_data = {"letter": [chr(ord("a") + i) for i in range(n)]}

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, item: int) -> dict[str, Any]:
        return {self.input_tensors_key: torch.tensor([float(item)]), self.index_key: item}


# ------------------------------------------------------------------------------------------- registry views


def test_samplers_categories_based_are_the_samplers_requiring_label2category() -> None:
    based = oml_name("registry.samplers", "SAMPLERS_CATEGORIES_BASED")
    registry = oml_name("registry.samplers", "SAMPLERS_REGISTRY")
    assert sorted(based) == ["category_balance", "distinct_category_balance"]
    assert based["category_balance"] is registry["category_balance"]
    assert "balance" in registry and "balance" not in based
    with pytest.raises(KeyError, match="'balance' is not in this view"):
        based["balance"]
    assert all("label2category" in inspect.signature(based[name]).parameters for name in based)


def test_transforms_albu_and_torch_split_the_transforms_by_oml_s_naming() -> None:
    albu = oml_name("registry.transforms", "TRANSFORMS_ALBU")
    torch_ = oml_name("registry.transforms", "TRANSFORMS_TORCH")
    every = oml_name("registry.transforms", "TRANSFORMS_REGISTRY")
    assert sorted(albu) == ["norm_albu", "norm_resize_albu", "norm_resize_albu_clip"]
    # OML's TRANSFORMS_TORCH, all of them there (oml registers more torchvision transforms)
    assert {"augs_torch", "norm_torch", "norm_resize_torch", "augs_hypvit_torch", "unicom_transforms"} <= set(
        torch_
    )
    assert set(albu) | set(torch_) == set(every) and not set(albu) & set(torch_)
    assert torch_["norm_torch"] is every["norm_torch"]


def test_get_extractor_takes_oml_s_model_name() -> None:
    get_pairwise_model = oml_name("registry.models", "get_pairwise_model")
    assert list(inspect.signature(oml_name("registry.models", "get_extractor")).parameters)[0] == "model_name"
    resnet = {
        "arch": "resnet18",
        "weights": None,
        "gem_p": None,
        "remove_fc": True,
        "normalise_features": False,
    }
    siamese = get_pairwise_model(
        model_name="trivial_distance_siamese", extractor={"name": "resnet", "args": resnet}
    )
    assert type(siamese.extractor).__name__ == "ResnetExtractor"
    # OML's function names (pytest ids of OML's parametrised tests are made of them)
    assert oml_name("registry.losses", "get_criterion").__name__ == "get_criterion"
    assert oml_name("registry.models", "get_pairwise_model_by_cfg").__name__ == "get_pairwise_model_by_cfg"


# ------------------------------------------------------------------------------------------------ datasets


DF = pd.DataFrame(
    {
        "label": [7, 7, 3, 3],
        "category": ["cat", "cat", "dog", "dog"],
        "is_query": [True, False, True, False],
        "is_gallery": [False, True, True, True],
    }
)


def test_df_labeled_dataset_puts_the_dataframe_s_labels_and_records_on_the_items() -> None:
    dataset = oml_name("datasets.dataframe", "DFLabeledDataset")(
        Letters(4), DF, extra_data={"w": [1, 2, 3, 4]}
    )
    assert len(dataset) == 4
    assert dataset[2] == {
        "input_tensors": torch.tensor([2.0]),
        "idx": 2,
        "category": "dog",
        "w": 3,
        "labels": 3,
    }
    np.testing.assert_array_equal(dataset.get_labels(), [7, 7, 3, 3])
    assert dataset.get_label2category() == {7: "cat", 3: "dog"}
    assert dataset.extra_data["letter"] == ["a", "b", "c", "d"] and dataset.extra_data["w"] == [1, 2, 3, 4]


def test_df_query_gallery_datasets_take_the_marked_rows() -> None:
    unlabeled = oml_name("datasets.dataframe", "DFQueryGalleryDataset")(
        Letters(4), DF.drop(columns=["label"])
    )
    assert unlabeled.get_query_ids().tolist() == [0, 2] and unlabeled.get_gallery_ids().tolist() == [1, 2, 3]
    assert "labels" not in unlabeled[1]
    labeled = oml_name("datasets.dataframe", "DFQueryGalleryLabeledDataset")(Letters(4), DF, labels_key="y")
    assert labeled.get_query_ids().tolist() == [0, 2] and labeled.get_gallery_ids().tolist() == [1, 2, 3]
    assert labeled[1]["y"] == 7 and labeled.get_label2category() == {7: "cat", 3: "dog"}
    assert labeled.get_query_ids().dtype == torch.int64


def test_df_datasets_refuse_a_dataframe_without_their_columns_or_rows() -> None:
    labeled = oml_name("datasets.dataframe", "DFQueryGalleryLabeledDataset")
    with pytest.raises(DataFrameFormatError, match=r"no column 'is_query', 'is_gallery'"):
        labeled(Letters(4), DF[["label"]])
    with pytest.raises(AssertionError, match="the dataframe has 4 rows and the dataset 3 items"):
        labeled(Letters(3), DF)  # OML's type (AssertionError) too


def test_pair_dataset_pairs_items_of_one_dataset_under_oml_s_keys() -> None:
    pair_dataset = oml_name("datasets", "PairDataset")
    assert pair_dataset is oml_name("datasets.pairs", "PairDataset")
    pairs = pair_dataset(
        Letters(3), [(2, 0), (1, 1)], input_tensors_key_1="left", input_tensors_key_2="right"
    )
    assert len(pairs) == 2
    assert pairs[0] == {"left": torch.tensor([2.0]), "right": torch.tensor([0.0]), "idx": 0}
    assert (pairs.input_tensors_key_1, pairs.pairs_2nd_key) == ("left", "right")
    assert isinstance(pairs, oml_name("interfaces.datasets", "IPairDataset"))


def test_oml_s_dataset_interfaces() -> None:
    indexed = oml_name("interfaces.datasets", "IIndexedDataset")
    pair_interface = oml_name("interfaces.datasets", "IPairDataset")
    html = oml_name("interfaces.datasets", "IHTMLVisualizableDataset")
    assert isinstance(Letters(1), indexed) and Letters(1).index_key == "idx"
    pairs = oml_name("datasets.pairs", "EmbeddingPairsDataset")(torch.zeros(2, 3), torch.ones(2, 3))
    assert isinstance(pairs, pair_interface) and isinstance(pairs, indexed)
    pairs.input_tensors_key_2 = "second"  # OML's attribute name sets the interface's key
    assert set(pairs[1]) == {"input_tensors_1", "second", "idx"}
    audio = oml_name("datasets.audios", "AudioBaseDataset")
    assert issubclass(audio, html) and not inspect.isabstract(audio)
    with pytest.raises(TypeError, match="abstract"):
        html()


# --------------------------------------------------------------------------------------------- the helpers


def test_figure_to_nparray_gives_the_rgb_pixels_and_closes_the_figure() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure = plt.figure(figsize=(1, 0.5), dpi=10, facecolor=(1.0, 0.0, 0.0))
    pixels = oml_name("utils.images.images", "figure_to_nparray")(figure)
    assert pixels.shape == (5, 10, 3) and pixels.dtype == np.uint8
    assert (pixels == [255, 0, 0]).all()
    assert not plt.fignum_exists(figure.number)


def test_triplet_names_of_oml_losses_triplet() -> None:
    get_tri_ids_in_plain = oml_name("losses.triplet", "get_tri_ids_in_plain")
    assert get_tri_ids_in_plain(9) == ([0, 3, 6], [1, 4, 7], [2, 5, 8])
    assert oml_name("losses.triplet", "TLogs") == dict[str, float]


def test_get_reduced_takes_oml_s_parameter_name() -> None:
    get_reduced = oml_name("functional.losses", "get_reduced")
    assert float(get_reduced(tensor=torch.tensor([1.0, 2.0, 6.0]), reduction="mean")) == 3.0
    assert float(get_reduced(torch.tensor([1.0, 2.0, 6.0]), "sum")) == 9.0


def test_get_transforms_for_pretrained_takes_oml_s_weights() -> None:
    from PIL import Image

    from oml_core.utils.images import imread_pil

    transforms, imread = oml_name("registry.transforms", "get_transforms_for_pretrained")(
        weights="vits16_dino"
    )
    assert imread is imread_pil
    # DINO's: resized to 224 x 224, normalised with ImageNet's mean and std: white is (1 - mean) / std
    white = transforms(Image.new("RGB", (40, 30), (255, 255, 255)))
    assert white.shape == (3, 224, 224)
    expected = (1 - torch.tensor([0.485, 0.456, 0.406])) / torch.tensor([0.229, 0.224, 0.225])
    torch.testing.assert_close(white[:, 100, 7], expected)


def test_oml_paths_of_the_plugins_names() -> None:
    import oml_audio
    import oml_texts

    from oml_core.interfaces.loggers import IPipelineLogger

    assert oml_name("lightning.pipelines.logging", "IPipelineLogger") is IPipelineLogger
    assert oml_name("models.audio.ecapa_tdnn.extractor", "ECAPATDNNExtractor") is oml_audio.ECAPATDNNExtractor
    assert oml_name("models", "ECAPATDNNExtractor") is oml_audio.ECAPATDNNExtractor
    assert oml_name("models.texts", "HFWrapper") is oml_texts.HFWrapper
    assert oml_name("models.texts.huggingface", "HFWrapper") is oml_texts.HFWrapper
    assert oml_name("utils.audios", "visualize_audio") is oml_audio.visualize_audio
    assert oml_name("utils.audios", "default_spec_repr_func") is oml_audio.default_spec_repr_func


def test_check_model_type_warns_for_a_model_hf_wrapper_is_not_written_for() -> None:
    check_model_type = oml_name("models.texts.huggingface", "check_model_type")
    with pytest.warns(UserWarning, match="Unexpected model type: <class 'torch.nn.modules.linear.Linear'>"):
        check_model_type(torch.nn.Linear(2, 2))
    from transformers import BertConfig, BertModel

    tiny = BertModel(
        BertConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_model_type(tiny)


def test_vis_vit_draws_the_attention_as_draw_attention() -> None:
    from oml_core.models import ViTExtractor

    vis_vit = oml_name("models.vit_dino.extractor", "vis_vit")
    torch.manual_seed(0)
    vit = ViTExtractor(None, "vits16", normalise_features=False)
    image = np.random.default_rng(0).integers(0, 256, size=(32, 48, 3), dtype=np.uint8)
    np.testing.assert_array_equal(vis_vit(vit, image), vit.draw_attention(image))
    other = vis_vit(vit, image, mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))
    assert other.shape == (32, 48, 3) and not np.array_equal(other, vit.draw_attention(image))

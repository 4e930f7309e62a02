"""The mock texts dataset: short product descriptions, generated in code (nothing is downloaded).

A label is one kind of product (``office chair``, ``espresso machine`` ...), its category the product family
(furniture, kitchen, electronics, clothing, sports, garden); the items of a label are descriptions of that kind of
product from several brands with different features, drawn by a seeded generator. 24 labels of 5 items: the first
3 kinds of each family (18 labels, 90 rows) are ``split == "train"``, the fourth (6 labels, 30 rows)
``"validation"``, every validation row both a query and in the gallery ("1 vs rest"). Columns: ``label, text,
split, is_query, is_gallery, category`` (OML's format with ``text`` for ``path``).

:func:`get_mock_texts_dataset` returns the two splits (OML's function); :func:`get_mock_texts_dataset_root`
writes ``df.csv`` into the oml cache once (atomically: a temporary folder renamed into place) and returns its
folder, the ``dataset_root`` of the ``texts`` dataset component when its config gives none.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from oml_core.caches.folder import get_cache_dir
from oml_core.const import (
    CATEGORIES_COLUMN,
    IS_GALLERY_COLUMN,
    IS_QUERY_COLUMN,
    LABELS_COLUMN,
    MOCK_DATASET_DEFAULT_CSV,
    SPLIT_COLUMN,
    TEXTS_COLUMN,
)
from oml_core.datasets.generated import GeneratedDataset, train_and_validation

MOCK_TEXTS_VERSION = 1
MOCK_TEXTS_PER_LABEL = 5
#: ``{category: [(product, [its features]), ...]}``: the last product of each category is a validation label.
PRODUCTS: dict[str, list[tuple[str, list[str]]]] = {
    "furniture": [
        (
            "office chair",
            ["adjustable lumbar support", "breathable mesh back", "padded armrests", "smooth casters"],
        ),
        (
            "dining table",
            ["solid oak top", "seats six people", "extendable leaf", "scratch-resistant finish"],
        ),
        (
            "bookshelf",
            ["five open shelves", "wall anchor kit", "engineered wood panels", "holds heavy books"],
        ),
        ("sofa bed", ["pull-out mattress", "linen upholstery", "two seat cushions", "converts in seconds"]),
    ],
    "kitchen": [
        ("espresso machine", ["15-bar pump", "milk frother wand", "cup warmer", "removable water tank"]),
        (
            "chef knife",
            ["high-carbon steel blade", "full tang handle", "razor sharp edge", "balanced weight"],
        ),
        ("blender", ["1200 watt motor", "glass jar", "pulse function", "crushes ice for smoothies"]),
        ("toaster", ["four wide slots", "bagel setting", "defrost button", "crumb tray"]),
    ],
    "electronics": [
        (
            "wireless headphones",
            ["active noise cancelling", "30-hour battery", "over-ear cushions", "bluetooth 5.3"],
        ),
        ("smartphone", ["6.5-inch OLED screen", "triple camera", "fast charging", "128 GB storage"]),
        ("laptop", ["14-inch display", "16 GB RAM", "backlit keyboard", "all-day battery"]),
        ("smart watch", ["heart rate monitor", "GPS tracking", "sleep tracking", "water resistant strap"]),
    ],
    "clothing": [
        ("rain jacket", ["waterproof shell", "adjustable hood", "sealed seams", "packs into its pocket"]),
        (
            "running shoes",
            ["cushioned midsole", "breathable knit upper", "grippy rubber outsole", "lightweight"],
        ),
        ("wool sweater", ["merino wool", "crew neck", "ribbed cuffs", "keeps you warm in winter"]),
        ("denim jeans", ["slim fit", "stretch cotton denim", "five pockets", "dark indigo wash"]),
    ],
    "sports": [
        ("yoga mat", ["non-slip surface", "6 mm thick", "carrying strap", "eco-friendly foam"]),
        ("tennis racket", ["graphite frame", "large sweet spot", "pre-strung", "cushioned grip"]),
        ("camping tent", ["sleeps four", "waterproof rainfly", "quick setup poles", "mesh windows"]),
        (
            "bicycle helmet",
            ["ventilated shell", "adjustable fit dial", "removable visor", "impact foam liner"],
        ),
    ],
    "garden": [
        ("garden hose", ["50 feet long", "kink-free", "brass fittings", "spray nozzle included"]),
        ("lawn mower", ["cordless battery", "adjustable cutting height", "grass bag", "mulching blade"]),
        ("pruning shears", ["bypass blades", "ergonomic grip", "safety lock", "cuts thick branches"]),
        ("flower pot", ["terracotta clay", "drainage hole", "saucer included", "for herbs and flowers"]),
    ],
}
BRANDS = ("Acme", "Northwind", "Globex", "Umbra", "Vertex", "Solano", "Kestrel", "Brightline")
TEMPLATES = (
    "{brand} {product}: {a} and {b}.",
    "The {brand} {product} with {a}, {b}.",
    "{Product} by {brand} featuring {a} and {b}.",
)


def get_mock_texts_dataframe(seed: int = 0) -> pd.DataFrame:
    """The whole mock dataset (both splits), a function of ``seed`` alone (a ``numpy.random.Generator``)."""
    rng = np.random.default_rng(seed)
    rows = []
    label = 0
    for position in range(4):
        for category, products in PRODUCTS.items():
            product, features = products[position]
            validation = position == 3
            for k in range(MOCK_TEXTS_PER_LABEL):
                a, b = rng.choice(len(features), size=2, replace=False)
                template = TEMPLATES[k % len(TEMPLATES)]
                text = template.format(
                    brand=BRANDS[int(rng.integers(len(BRANDS)))],
                    product=product,
                    Product=product.capitalize(),
                    a=features[a],
                    b=features[b],
                )
                rows.append(
                    {
                        LABELS_COLUMN: label,
                        TEXTS_COLUMN: text,
                        SPLIT_COLUMN: "validation" if validation else "train",
                        IS_QUERY_COLUMN: True if validation else None,
                        IS_GALLERY_COLUMN: True if validation else None,
                        CATEGORIES_COLUMN: category,
                    }
                )
            label += 1
    return pd.DataFrame(rows)


def get_mock_texts_dataset(seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """OML's ``get_mock_texts_dataset``: ``(df_train, df_val)``, the rows of each split with a fresh index;
    ``df_val``'s ``is_query`` and ``is_gallery`` are bool columns (in memory: nothing is written)."""
    return train_and_validation(get_mock_texts_dataframe(seed))


def _write(root: Path, seed: int) -> list[str]:
    """Write ``df.csv`` of the mock texts of ``seed`` into ``root`` and return its name."""
    get_mock_texts_dataframe(seed).to_csv(root / MOCK_DATASET_DEFAULT_CSV, index=False, lineterminator="\n")
    return [MOCK_DATASET_DEFAULT_CSV]


#: The mock texts as a generated dataset (its manifest, completeness and atomic materialisation).
MOCK_TEXTS = GeneratedDataset(
    name="mock_texts",
    version=MOCK_TEXTS_VERSION,
    tables=(MOCK_DATASET_DEFAULT_CSV,),
    write=_write,
    description="the mock texts dataset",
)


def get_mock_texts_dataset_root(cache_dir: Path | str | None = None, seed: int = 0) -> Path:
    """The folder ``<cache>/mock_texts_v<version>_seed<seed>`` holding ``df.csv`` of the mock texts, written
    there on first use, atomically (:meth:`~oml_core.datasets.generated.GeneratedDataset.materialise`).
    ``<cache>`` is ``cache_dir`` or :func:`~oml_core.caches.folder.get_cache_dir`.

    Raises:
        OSError: the cache cannot be written (the message names the folder).
    """
    cache = Path(cache_dir).expanduser() if cache_dir is not None else get_cache_dir()
    return MOCK_TEXTS.materialise(cache / f"mock_texts_v{MOCK_TEXTS_VERSION}_seed{seed}", seed)


__all__ = [
    "MOCK_TEXTS",
    "MOCK_TEXTS_PER_LABEL",
    "PRODUCTS",
    "get_mock_texts_dataframe",
    "get_mock_texts_dataset",
    "get_mock_texts_dataset_root",
]

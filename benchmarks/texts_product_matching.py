"""A product-matching text-retrieval set generated in code, hard for a generic sentence model (benchmark only).

An identity (a label) is one sellable product: brand, product type, series, model number, a capacity (or size)
and a colour, e.g. ``Kestrel portable SSD Nova NV-740, 1 TB, black``. Its items are listings of it written by
different sellers: the same facts in other words and orders, with

- the type said with a synonym (``portable SSD`` / ``external solid state drive``) and the brand in another case;
- the model code in another format (``NV-740`` / ``NV740`` / ``nv 740`` / ``Model NV740``);
- the capacity in another unit or spelling (``1 TB`` / ``1TB`` / ``1000 GB`` / ``1,000GB`` / ``1 terabyte``);
- the colour abbreviated (``black`` / ``blk`` / ``BLACK``);
- one to three marketing phrases of the product type and zero to two seller phrases (``free shipping``), drawn
  for every listing from pools shared by every identity of that type, and a typo (two letters swapped) in one
  word of them with probability ``TYPO_PROBABILITY``.

A family is a brand, a type and a series; its ``IDENTITIES_PER_FAMILY`` identities are distinct
``(model number, capacity, colour)`` triples drawn from two model numbers of the series, so two identities of a
family share everything but one to three of those tokens. Two listings of one family but different identities
thus share most of their words, and two listings of one identity often share few: a generic model ranks the
near-identical listing of a sibling product first, while what decides the identity (the model number, the
capacity whatever its unit, the colour whatever its spelling) is learnable, the same vocabulary serving training
and validation.

The first ``n_train_families`` families are ``split == "train"``, the next ``n_val_families`` ``"validation"``
(labels disjoint, as OML's splits), every validation row a query and in the gallery ("1 vs rest"). The
``category`` is the family (``Kestrel portable SSD Nova``), for the category balance sampler's hard batches.
Everything is a function of ``seed`` alone (a ``numpy.random.Generator``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from oml_core.const import (
    CATEGORIES_COLUMN,
    IS_GALLERY_COLUMN,
    IS_QUERY_COLUMN,
    LABELS_COLUMN,
    SPLIT_COLUMN,
    TEXTS_COLUMN,
)

IDENTITIES_PER_FAMILY = 4
MODELS_PER_FAMILY = 2
TYPO_PROBABILITY = 0.3


@dataclass(frozen=True)
class ProductType:
    """A kind of product: its names (synonyms), capacities ``(value, unit)`` and marketing phrases."""

    names: tuple[str, ...]
    capacities: tuple[tuple[float, str], ...]
    phrases: tuple[str, ...]


PRODUCT_TYPES: tuple[ProductType, ...] = (
    ProductType(
        ("portable SSD", "external solid state drive", "portable solid-state drive", "external SSD"),
        ((500, "GB"), (1, "TB"), (2, "TB"), (4, "TB")),
        (
            "fast transfer speeds",
            "USB-C connection",
            "shock resistant",
            "compact design",
            "for photos and video",
        ),
    ),
    ProductType(
        ("microSD card", "micro SD memory card", "microSDXC card", "memory card"),
        ((64, "GB"), (128, "GB"), (256, "GB"), (512, "GB")),
        ("with SD adapter", "for phones and cameras", "A2 app performance", "4K video ready", "waterproof"),
    ),
    ProductType(
        ("smartphone", "mobile phone", "cell phone", "android phone"),
        ((128, "GB"), (256, "GB"), (512, "GB"), (1, "TB")),
        ("unlocked", "dual SIM", "OLED display", "fast charging", "triple camera"),
    ),
    ProductType(
        ("laptop", "notebook computer", "notebook", "laptop computer"),
        ((256, "GB"), (512, "GB"), (1, "TB"), (2, "TB")),
        ("16 GB RAM", "backlit keyboard", "all-day battery", "lightweight aluminium body", "full HD display"),
    ),
    ProductType(
        ("power bank", "portable charger", "battery pack", "external battery"),
        ((5000, "mAh"), (10000, "mAh"), (20000, "mAh"), (26800, "mAh")),
        ("charges two devices", "USB-C power delivery", "LED charge indicator", "slim design", "fast charge"),
    ),
    ProductType(
        ("computer monitor", "monitor", "display screen", "PC monitor"),
        ((24, "inch"), (27, "inch"), (32, "inch"), (34, "inch")),
        (
            "IPS panel",
            "144 Hz refresh rate",
            "height adjustable stand",
            "HDMI and DisplayPort",
            "low blue light",
        ),
    ),
    ProductType(
        ("wireless earbuds", "bluetooth earbuds", "true wireless earphones", "in-ear headphones"),
        ((20, "hours"), (30, "hours"), (40, "hours"), (50, "hours")),
        ("noise cancelling", "charging case", "sweat resistant", "touch controls", "clear calls"),
    ),
    ProductType(
        ("external hard drive", "portable hard drive", "external HDD", "portable HDD"),
        ((1, "TB"), (2, "TB"), (4, "TB"), (5, "TB")),
        ("USB 3.0", "plug and play", "backup software included", "for PC and Mac", "durable casing"),
    ),
)
BRANDS = (
    "Kestrel",
    "Northwind",
    "Globex",
    "Umbra",
    "Vertex",
    "Solano",
    "Brightline",
    "Acme",
    "Zenith",
    "Orbis",
)
SERIES = (
    "Nova",
    "Edge",
    "Flux",
    "Pulse",
    "Apex",
    "Vista",
    "Core",
    "Prime",
    "Aero",
    "Terra",
    "Lumen",
    "Strata",
)
#: ``{colour: its spellings}``.
COLOURS: dict[str, tuple[str, ...]] = {
    "black": ("black", "blk", "Black", "BLACK"),
    "white": ("white", "wht", "White", "WHITE"),
    "silver": ("silver", "slv", "Silver", "SILVER"),
    "blue": ("blue", "blu", "Blue", "navy blue"),
    "grey": ("grey", "gray", "gry", "Space Grey"),
    "red": ("red", "rd", "Red", "RED"),
}
SELLER_PHRASES = (
    "free shipping",
    "brand new",
    "in stock",
    "fast delivery",
    "sealed box",
    "1 year warranty",
    "best price",
    "ships today",
)
TEMPLATES = (
    "{brand} {type} {series} {code}, {capacity}, {colour}",
    "{brand} {series} {code} {type} {capacity} {colour}",
    "{type} {brand} {code} ({colour}, {capacity})",
    "{capacity} {brand} {series} {type} {code} in {colour}",
    "{colour} {brand} {type} {series} - {code} - {capacity}",
    "New {brand} {series} {type}, model {code}, {colour}, {capacity}",
)


def format_capacity(value: float, unit: str, rng: np.random.Generator) -> str:
    """One spelling of a capacity: the unit spaced or not, or spelled out; TB also as GB (``1 TB`` is ``1000 GB``
    or ``1,000GB``), GB of 1000 or more also as TB."""
    if unit == "TB" and rng.random() < 0.4:
        value, unit = value * 1000, "GB"
    elif unit == "GB" and value >= 500 and rng.random() < 0.3:
        value, unit = value / 1000, "TB"
    number = f"{value:g}"
    if value >= 1000 and rng.random() < 0.5:
        number = f"{int(value):,}"
    long = {"GB": "gigabytes", "TB": "terabytes", "mAh": "mAh", "inch": "inches", "hours": "hours"}[unit]
    short = {"GB": "GB", "TB": "TB", "mAh": "mAh", "inch": '"', "hours": "h"}[unit]
    choice = int(rng.integers(3))
    if choice == 0:
        return f"{number} {short}" if short != '"' else f"{number}{short}"
    if choice == 1:
        return f"{number}{short}"
    return f"{number} {long}"


def format_code(letters: str, number: int, rng: np.random.Generator) -> str:
    """One spelling of the model code ``letters-number``: ``NV-740``, ``NV740``, ``nv 740`` or ``NV 740``."""
    return (
        f"{letters}-{number}",
        f"{letters}{number}",
        f"{letters.lower()} {number}",
        f"{letters} {number}",
    )[int(rng.integers(4))]


def with_typo(phrase: str, rng: np.random.Generator) -> str:
    """``phrase`` with two adjacent letters of one of its words (of 4 letters or more) swapped, if it has one."""
    words = phrase.split(" ")
    long_words = [i for i, word in enumerate(words) if len(word) >= 4 and word.isalpha()]
    if not long_words:
        return phrase
    i = long_words[int(rng.integers(len(long_words)))]
    word = words[i]
    j = int(rng.integers(1, len(word) - 2))
    words[i] = word[:j] + word[j + 1] + word[j] + word[j + 2 :]
    return " ".join(words)


def listing(
    brand: str,
    kind: ProductType,
    series: str,
    code: tuple[str, int],
    capacity: tuple[float, str],
    colour: str,
    rng: np.random.Generator,
) -> str:
    """One seller's listing of the identity ``(brand, kind, series, code, capacity, colour)``."""
    title = TEMPLATES[int(rng.integers(len(TEMPLATES)))].format(
        brand=(brand, brand.upper(), brand.lower())[int(rng.integers(3))],
        type=kind.names[int(rng.integers(len(kind.names)))],
        series=series,
        code=format_code(*code, rng),
        capacity=format_capacity(*capacity, rng),
        colour=COLOURS[colour][int(rng.integers(len(COLOURS[colour])))],
    )
    phrases = [
        kind.phrases[i] for i in rng.choice(len(kind.phrases), size=int(rng.integers(1, 4)), replace=False)
    ]
    phrases += [
        SELLER_PHRASES[i] for i in rng.choice(len(SELLER_PHRASES), size=int(rng.integers(3)), replace=False)
    ]
    phrases = [phrases[i] for i in rng.permutation(len(phrases))]
    if rng.random() < TYPO_PROBABILITY:
        k = int(rng.integers(len(phrases)))
        phrases[k] = with_typo(phrases[k], rng)
    body = ", ".join(phrases)
    return f"{title}. {body[0].upper()}{body[1:]}."


def product_matching_dataframe(
    n_train_families: int = 120, n_val_families: int = 40, listings_per_identity: int = 4, seed: int = 0
) -> pd.DataFrame:
    """The set in OML's format: ``label, text, split, is_query, is_gallery, category`` (see the module's doc);
    ``(n_train_families + n_val_families) * IDENTITIES_PER_FAMILY`` labels of ``listings_per_identity`` rows."""
    rng = np.random.default_rng(seed)
    rows = []
    families: set[tuple[str, int, str]] = set()
    label = 0
    while len(families) < n_train_families + n_val_families:
        brand = BRANDS[int(rng.integers(len(BRANDS)))]
        kind_index = int(rng.integers(len(PRODUCT_TYPES)))
        series = SERIES[int(rng.integers(len(SERIES)))]
        if (brand, kind_index, series) in families:
            continue
        validation = len(families) >= n_train_families
        families.add((brand, kind_index, series))
        kind = PRODUCT_TYPES[kind_index]
        letters = series[:2].upper()
        numbers = 100 * rng.choice(
            np.arange(1, 10), size=MODELS_PER_FAMILY, replace=False
        ) + 10 * rng.integers(0, 10, size=MODELS_PER_FAMILY)
        colours = list(COLOURS)
        triples = [
            (int(m), int(c), colours[int(o)])
            for m, c, o in zip(
                rng.integers(MODELS_PER_FAMILY, size=64),
                rng.integers(len(kind.capacities), size=64),
                rng.integers(2, size=64) + 2 * int(rng.integers(3)),
                strict=True,
            )
        ]
        identities = list(dict.fromkeys(triples))[:IDENTITIES_PER_FAMILY]
        for model, capacity, colour in identities:
            for _ in range(listings_per_identity):
                rows.append(
                    {
                        LABELS_COLUMN: label,
                        TEXTS_COLUMN: listing(
                            brand,
                            kind,
                            series,
                            (letters, int(numbers[model])),
                            kind.capacities[capacity],
                            colour,
                            rng,
                        ),
                        SPLIT_COLUMN: "validation" if validation else "train",
                        IS_QUERY_COLUMN: True if validation else None,
                        IS_GALLERY_COLUMN: True if validation else None,
                        CATEGORIES_COLUMN: f"{brand} {kind.names[0]} {series}",
                    }
                )
            label += 1
    return pd.DataFrame(rows)


def write_product_matching(root: Path, **kwargs: int) -> Path:
    """Write :func:`product_matching_dataframe` ``(**kwargs)`` as ``root/df.csv`` (``root`` created) and return
    ``root``, a ``dataset_root`` of the ``texts`` dataset component."""
    root.mkdir(parents=True, exist_ok=True)
    product_matching_dataframe(**kwargs).to_csv(root / "df.csv", index=False, lineterminator="\n")
    return root

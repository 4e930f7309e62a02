"""Names provided by the first-party plugin distributions, for error messages only.

When a name is unknown because its distribution is not installed (``pip uninstall oml-losses``),
the registry can say which distribution to install. This table is a hint, never a source of
components; ``tests/test_catalog.py`` checks it against what the installed plugins really register.
"""

from types import MappingProxyType

FIRST_PARTY_PROVIDERS: MappingProxyType[tuple[str, str], str] = MappingProxyType(
    {
        ("extractor", "resnet"): "oml-models",
        ("loss", "triplet"): "oml-losses",
        ("loss", "triplet_plain"): "oml-losses",
        ("loss", "triplet_with_miner"): "oml-losses",
        ("loss", "surrogate_precision"): "oml-losses",
        ("loss", "arcface"): "oml-losses",
        ("loss", "mlp_arcface"): "oml-losses",
        ("miner", "all_triplets"): "oml-losses",
        ("miner", "hard_triplets"): "oml-losses",
        ("miner", "n_hard_triplets"): "oml-losses",
        ("miner", "hard_cluster"): "oml-losses",
        ("miner", "triplets_with_memory"): "oml-losses",
        ("miner", "miner_with_bank"): "oml-losses",
        ("sampler", "balance"): "oml-samplers",
        ("sampler", "category_balance"): "oml-samplers",
        ("sampler", "distinct_category_balance"): "oml-samplers",
        ("logger", "tensorboard"): "oml-loggers",
    }
)

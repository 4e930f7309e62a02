"""``oml embed OUT [OVERRIDES...]``: the command line of :func:`~oml_ray.embed.embed_corpus` (registered as a
``command`` row of ``OML_COMPONENTS``).

    oml embed [--shard-rows 4096] [--workers N] [--num-gpus G] [--num-cpus C] [--address ADDRESS]
        [--config-path DIR] [--config-name index_build] OUT [hydra overrides of oml index build's config ...]

(the options first: argparse takes ``OUT`` and the overrides together)

The config is ``oml index build``'s (its dataset component and data keys, extractor, transforms, ``gallery_rows``),
composed with the overrides first, so that a bad override is one line before Ray starts.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from oml_core.config.compose import compose_config
from oml_core.registry import Registry
from oml_ray.embed import SHARD_ROWS, EmbedSettings, embed_corpus

#: The default config (``oml index build``'s).
EMBED_CONFIG = "index_build"


def embed_command(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    """Add ``oml embed``'s arguments to ``parser`` and return its handler (see the module)."""
    parser.add_argument(
        "out", type=Path, metavar="OUT", help="the folder of shards: new, or a run's to continue"
    )
    parser.add_argument("overrides", nargs="*", metavar="OVERRIDE", help="hydra overrides of the config")
    parser.add_argument("--shard-rows", type=int, default=SHARD_ROWS, help=f"items per shard ({SHARD_ROWS})")
    parser.add_argument(
        "--workers", type=int, default=None, help="Ray actors (default: per GPU or CPU group)"
    )
    parser.add_argument("--num-gpus", type=float, default=0.0, help="GPUs per actor (default 0: on CPUs)")
    parser.add_argument("--num-cpus", type=float, default=1.0, help="CPUs per actor (default 1)")
    parser.add_argument(
        "--address",
        help="the Ray cluster to run on (default: RAY_ADDRESS, else a new local one)",
    )
    parser.add_argument("--config-path", "-cp", metavar="DIR", help="directory of your yaml configs")
    parser.add_argument("--config-name", "-cn", metavar="NAME", default=EMBED_CONFIG, help="config name")
    return _run


def _run(args: argparse.Namespace) -> int:
    registry = Registry()
    cfg = compose_config(args.config_name, args.overrides, args.config_path, registry)
    settings = EmbedSettings(
        out_dir=args.out,
        shard_rows=args.shard_rows,
        workers=args.workers,
        num_gpus=args.num_gpus,
        num_cpus=args.num_cpus,
        address=args.address,
    )
    print(embed_corpus(cfg, settings, registry).as_text())
    return 0

"""Hook implementations of the ``oml_losses`` plugin: the triplet losses and the all-triplets miner.

Factories are lazy ``"module:attr"`` strings: registering imports no torch module.
"""

from __future__ import annotations

from oml_core import hookimpl
from oml_core.registry.hookspecs import RegisterCallback

LOSSES = {
    "triplet": ("oml_losses.triplet:TripletLoss", "triplet loss of (anchor, positive, negative)"),
    "triplet_plain": ("oml_losses.triplet:TripletLossPlain", "triplet loss of stacked rows 0,1,2 / 3,4,5 .."),
    "triplet_with_miner": ("oml_losses.triplet:TripletLossWithMiner", "triplet loss of mined triplets"),
}

MINERS = {
    "all_triplets": ("oml_losses.miners.inbatch_all_tri:AllTripletsMiner", "all triplets of a batch"),
}


@hookimpl
def oml_register_losses(register: RegisterCallback) -> None:
    """Register ``triplet``, ``triplet_plain`` and ``triplet_with_miner``."""
    for name, (factory, description) in LOSSES.items():
        register(name, factory, description=description)


@hookimpl
def oml_register_miners(register: RegisterCallback) -> None:
    """Register ``all_triplets``."""
    for name, (factory, description) in MINERS.items():
        register(name, factory, description=description)

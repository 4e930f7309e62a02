"""Hook implementations of the core's built-ins, registered by every :class:`~oml_core.registry.Registry`
under the plugin name ``oml_core`` exactly as an installed plugin would be."""

from oml_core import hookimpl

OPTIMIZERS = {
    "sgd": "torch.optim:SGD",
    "adam": "torch.optim:Adam",
    "adamw": "torch.optim:AdamW",
    "adamax": "torch.optim:Adamax",
    "adagrad": "torch.optim:Adagrad",
    "rmsprop": "torch.optim:RMSprop",
}

SCHEDULERS = {
    "lambda": "torch.optim.lr_scheduler:LambdaLR",
    "step": "torch.optim.lr_scheduler:StepLR",
    "multi_step": "torch.optim.lr_scheduler:MultiStepLR",
    "exponential": "torch.optim.lr_scheduler:ExponentialLR",
    "cosine_annealing": "torch.optim.lr_scheduler:CosineAnnealingLR",
    "cosine_annealing_warm_restarts": "torch.optim.lr_scheduler:CosineAnnealingWarmRestarts",
    "reduce_on_plateau": "torch.optim.lr_scheduler:ReduceLROnPlateau",
    "cyclic": "torch.optim.lr_scheduler:CyclicLR",
    "one_cycle": "torch.optim.lr_scheduler:OneCycleLR",
}


@hookimpl
def oml_register_optimizers(register):
    for name, factory in OPTIMIZERS.items():
        register(name, factory, description=f"{factory.rpartition(':')[2]} from torch.optim")


@hookimpl
def oml_register_schedulers(register):
    for name, factory in SCHEDULERS.items():
        register(name, factory, description=f"{factory.rpartition(':')[2]} from torch.optim.lr_scheduler")


@hookimpl
def oml_register_transforms(register):
    register(
        "norm_resize",
        "oml_core.builtins.transforms:get_normalisation_resize",
        description="resize + ImageNet normalisation (PIL + torch, no torchvision)",
    )
    register(
        "augs_flip",
        "oml_core.builtins.transforms:get_augs_flip",
        description="random horizontal flip + resize + ImageNet normalisation",
    )


@hookimpl
def oml_register_retrieval_metrics(register):
    register(
        "cmc", "oml_core.functional.metrics:calc_cmc", description="cmc@k: 1 if a relevant item is in top k"
    )
    register(
        "precision",
        "oml_core.functional.metrics:calc_precision",
        description="precision@k with denominator min(k, n_gt) (OML)",
    )
    register(
        "map", "oml_core.functional.metrics:calc_map", description="map@k over the relevant retrieved items"
    )


@hookimpl
def oml_register_config_dirs(register):
    register("pkg://oml_core.configs")

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
    "lambda": "oml_core.builtins.schedules:lambda_lr",
    "step": "torch.optim.lr_scheduler:StepLR",
    "multi_step": "torch.optim.lr_scheduler:MultiStepLR",
    "exponential": "torch.optim.lr_scheduler:ExponentialLR",
    "cosine_annealing": "torch.optim.lr_scheduler:CosineAnnealingLR",
    "cosine_annealing_warm_restarts": "torch.optim.lr_scheduler:CosineAnnealingWarmRestarts",
    "reduce_on_plateau": "torch.optim.lr_scheduler:ReduceLROnPlateau",
    "cyclic": "torch.optim.lr_scheduler:CyclicLR",
    "one_cycle": "torch.optim.lr_scheduler:OneCycleLR",
}

#: The learning-rate functions of the ``lambda`` scheduler: ``{name: description}``, each a factory of
#: :mod:`oml_core.builtins.lr_functions` of that name.
LR_FUNCTIONS = {
    "constant": "the factor 1 at every epoch",
    "linear_warmup": "linear warm-up from start_factor to 1 over warmup_epochs, then 1",
    "cosine": "cosine decay from 1 to min_factor over total_epochs, after an optional linear warm-up",
    "step": "gamma ** (epoch // step_size)",
}


@hookimpl
def oml_register_optimizers(register):
    for name, factory in OPTIMIZERS.items():
        register(name, factory, description=f"{factory.rpartition(':')[2]} from torch.optim")


@hookimpl
def oml_register_schedulers(register):
    for name, factory in SCHEDULERS.items():
        described = "LambdaLR" if name == "lambda" else factory.rpartition(":")[2]
        register(name, factory, description=f"{described} from torch.optim.lr_scheduler")


@hookimpl
def oml_register_lr_functions(register):
    for name, description in LR_FUNCTIONS.items():
        register(name, f"oml_core.builtins.lr_functions:{name}", description=description)


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
def oml_register_datasets(register):
    register(
        "images",
        "oml_core.datasets.image_data:ImageData",
        description="images of a dataframe in OML's format (the default dataset)",
    )


@hookimpl
def oml_register_retrieval_metrics(register):
    metrics = {
        "cmc": ("metrics:calc_cmc", "cmc@k: 1 if a relevant item is in top k"),
        "precision": ("metrics:calc_precision", "precision@k with denominator min(k, n_gt) (OML)"),
        "map": ("metrics:calc_map", "map@k over the relevant retrieved items"),
        "recall": ("ranking_metrics:calc_recall", "recall@k with denominator min(k, n_gt)"),
        "mrr": ("ranking_metrics:calc_mrr", "reciprocal rank of the first relevant item in top k"),
        "ndcg": ("ranking_metrics:calc_ndcg", "nDCG@k, binary relevance, ideal DCG over min(k, n_gt)"),
        "precision_classic": ("ranking_metrics:calc_precision_classic", "precision@k with denominator k"),
        "fallout": ("ranking_metrics:calc_fallout", "fall-out@k: negatives in top k / all negatives"),
        "map_r": ("ranking_metrics:calc_map_r", "TF Similarity's mAP@K with denominator R = n_gt"),
    }
    for name, (target, description) in metrics.items():
        register(name, f"oml_core.functional.{target}", description=description)


@hookimpl
def oml_register_config_dirs(register):
    register("pkg://oml_core.configs")


@hookimpl
def oml_register_postprocessors(register):
    register(
        "constant_thresholding",
        "oml_core.retrieval.postprocessors.thresholding:ConstantThresholding",
        description="keep the retrieved items closer than a distance threshold",
    )
    register(
        "adaptive_thresholding",
        "oml_core.retrieval.postprocessors.thresholding:AdaptiveThresholding",
        description="cut every retrieved list after its first big distance gap",
    )


@hookimpl
def oml_register_knn_backends(register):
    register(
        "exact",
        "oml_core.retrieval.knn_backends:ExactKnnIndex",
        description="exact search in memory-bounded blocks (the default)",
    )

"""The core's built-ins, registered by every :class:`~oml_core.registry.Registry` under the plugin name
``oml_core`` exactly as an installed plugin would be.

:data:`COMPONENTS` is the plugin's one table, as every plugin's (:mod:`oml_core.utils.lazy`), declared as
``OML_COMPONENTS``: the registry registers it, with no hook function. Factories are lazy ``"module:attr"`` strings:
registering imports no torch module. The default config of a component ``name`` of kind ``kind`` is
``oml_core/configs/<kind>/<name>.yaml``."""

from __future__ import annotations

from oml_core.utils.lazy import Component

#: Every built-in component. The package ``oml_core`` takes no exports from it (its public names are its modules').
COMPONENTS: tuple[Component, ...] = (
    Component("optimizer", "sgd", "torch.optim:SGD", "SGD from torch.optim"),
    Component("optimizer", "adam", "torch.optim:Adam", "Adam from torch.optim"),
    Component("optimizer", "adamw", "torch.optim:AdamW", "AdamW from torch.optim"),
    Component("optimizer", "adamax", "torch.optim:Adamax", "Adamax from torch.optim"),
    Component("optimizer", "adagrad", "torch.optim:Adagrad", "Adagrad from torch.optim"),
    Component("optimizer", "rmsprop", "torch.optim:RMSprop", "RMSprop from torch.optim"),
    Component("optimizer", "adadelta", "torch.optim:Adadelta", "Adadelta from torch.optim"),
    Component("optimizer", "asgd", "torch.optim:ASGD", "ASGD (averaged SGD) from torch.optim"),
    Component(
        "optimizer", "lbfgs", "torch.optim:LBFGS", "L-BFGS from torch.optim (its step takes a closure)"
    ),
    Component(
        "optimizer", "rprop", "torch.optim:Rprop", "Rprop (resilient backpropagation) from torch.optim"
    ),
    Component(
        "scheduler",
        "lambda",
        "oml_core.builtins.schedules:lambda_lr",
        "LambdaLR from torch.optim.lr_scheduler",
    ),
    Component(
        "scheduler",
        "multiplicative",
        "oml_core.builtins.schedules:multiplicative_lr",
        "MultiplicativeLR from torch.optim.lr_scheduler",
    ),
    Component("scheduler", "step", "torch.optim.lr_scheduler:StepLR", "StepLR from torch.optim.lr_scheduler"),
    Component(
        "scheduler",
        "multi_step",
        "torch.optim.lr_scheduler:MultiStepLR",
        "MultiStepLR from torch.optim.lr_scheduler",
    ),
    Component(
        "scheduler",
        "exponential",
        "torch.optim.lr_scheduler:ExponentialLR",
        "ExponentialLR from torch.optim.lr_scheduler",
    ),
    Component(
        "scheduler",
        "cosine_annealing",
        "torch.optim.lr_scheduler:CosineAnnealingLR",
        "CosineAnnealingLR from torch.optim.lr_scheduler",
    ),
    Component(
        "scheduler",
        "cosine_annealing_warm_restarts",
        "torch.optim.lr_scheduler:CosineAnnealingWarmRestarts",
        "CosineAnnealingWarmRestarts from torch.optim.lr_scheduler",
    ),
    Component(
        "scheduler",
        "reduce_on_plateau",
        "torch.optim.lr_scheduler:ReduceLROnPlateau",
        "ReduceLROnPlateau from torch.optim.lr_scheduler",
    ),
    Component(
        "scheduler", "cyclic", "torch.optim.lr_scheduler:CyclicLR", "CyclicLR from torch.optim.lr_scheduler"
    ),
    Component(
        "scheduler",
        "one_cycle",
        "torch.optim.lr_scheduler:OneCycleLR",
        "OneCycleLR from torch.optim.lr_scheduler",
    ),
    Component(
        "lr_function", "constant", "oml_core.builtins.lr_functions:constant", "the factor 1 at every epoch"
    ),
    Component(
        "lr_function",
        "linear_warmup",
        "oml_core.builtins.lr_functions:linear_warmup",
        "linear warm-up from start_factor to 1 over warmup_epochs, then 1",
    ),
    Component(
        "lr_function",
        "cosine",
        "oml_core.builtins.lr_functions:cosine",
        "cosine decay from 1 to min_factor over total_epochs, after an optional linear warm-up",
    ),
    Component("lr_function", "step", "oml_core.builtins.lr_functions:step", "gamma ** (epoch // step_size)"),
    Component(
        "transforms",
        "norm_resize",
        "oml_core.builtins.transforms:get_normalisation_resize",
        "resize + ImageNet normalisation (PIL + torch, no torchvision)",
    ),
    Component(
        "transforms",
        "augs_flip",
        "oml_core.builtins.transforms:get_augs_flip",
        "random horizontal flip + resize + ImageNet normalisation",
    ),
    Component(
        "dataset",
        "images",
        "oml_core.datasets.image_data:ImageData",
        "images of a dataframe in OML's format (the default dataset)",
    ),
    Component(
        "retrieval_metric",
        "cmc",
        "oml_core.functional.metrics:calc_cmc",
        "cmc@k: 1 if a relevant item is in top k",
    ),
    Component(
        "retrieval_metric",
        "precision",
        "oml_core.functional.metrics:calc_precision",
        "precision@k with denominator min(k, n_gt) (OML)",
    ),
    Component(
        "retrieval_metric",
        "map",
        "oml_core.functional.metrics:calc_map",
        "map@k over the relevant retrieved items",
    ),
    Component(
        "retrieval_metric",
        "recall",
        "oml_core.functional.ranking_metrics:calc_recall",
        "recall@k with denominator min(k, n_gt)",
    ),
    Component(
        "retrieval_metric",
        "mrr",
        "oml_core.functional.ranking_metrics:calc_mrr",
        "reciprocal rank of the first relevant item in top k",
    ),
    Component(
        "retrieval_metric",
        "ndcg",
        "oml_core.functional.ranking_metrics:calc_ndcg",
        "nDCG@k, binary relevance, ideal DCG over min(k, n_gt)",
    ),
    Component(
        "retrieval_metric",
        "precision_classic",
        "oml_core.functional.ranking_metrics:calc_precision_classic",
        "precision@k with denominator k",
    ),
    Component(
        "retrieval_metric",
        "fallout",
        "oml_core.functional.ranking_metrics:calc_fallout",
        "fall-out@k: negatives in top k / all negatives",
    ),
    Component(
        "retrieval_metric",
        "map_r",
        "oml_core.functional.ranking_metrics:calc_map_r",
        "TF Similarity's mAP@K with denominator R = n_gt",
    ),
    Component(
        "postprocessor",
        "constant_thresholding",
        "oml_core.retrieval.postprocessors.thresholding:ConstantThresholding",
        "keep the retrieved items closer than a distance threshold",
    ),
    Component(
        "postprocessor",
        "adaptive_thresholding",
        "oml_core.retrieval.postprocessors.thresholding:AdaptiveThresholding",
        "cut every retrieved list after its first big distance gap",
    ),
    Component(
        "knn_backend",
        "exact",
        "oml_core.knn.exact:ExactKnnIndex",
        "exact search in memory-bounded blocks (the default)",
    ),
    Component(
        "extractor",
        "onnx",
        "oml_core.export.extractor:OnnxExtractor",
        "an ONNX export of oml export, run by onnxruntime (needs oml-core[onnx])",
    ),
)


#: The declarations every ``Registry`` reads (:mod:`oml_core.registry.hookspecs`): the table, and the folder of the
#: default configs, ``<kind>/<name>.yaml``.
OML_COMPONENTS = COMPONENTS
OML_CONFIG_DIRS = ("pkg://oml_core.configs",)

"""Hook specifications of the ``oml`` plugin system: the contract between oml and a plugin.

A plugin is a module (usually named by an entry point of the group ``oml`` in its distribution's
``pyproject.toml``). There is one way to register: the module keeps its components in one table, ``COMPONENTS``,
of :class:`~oml_core.utils.lazy.Component` rows (kind, name, factory, description, aliases), and declares it,
as pytest reads a module's ``pytest_plugins``; the registry registers every row through its kind's hook, with no
hook function of the plugin's::

    from oml_core.utils.lazy import Component

    COMPONENTS = (Component("extractor", "my_net", "my_pkg.models:MyNet", "my extractor", aliases=("mynet",)),)

    OML_COMPONENTS = COMPONENTS  # the table (manager.COMPONENTS_DECLARATION)
    OML_CONFIG_DIRS = ("pkg://my_pkg.configs",)  # its default configs (manager.CONFIG_DIRS_DECLARATION)

The kinds of the rows are checked when the plugin is loaded (a kind that oml does not have makes the plugin fail
to load, naming the closest); each row is registered as a hook's ``register`` call would be, with the same checks
(name, factory, ``every_run``, a name twice), when the hooks are called. **The hooks** below are for what is
known only at run time, as llm's ``register_models``: a plugin implements any subset of them with
``@oml_core.hookimpl``, each calling its ``register`` callback per component; a plugin written for the hooks alone
works as it did, and a plugin may have both (a name in its table and in its hook of one kind is registered twice).

**When hooks are called.** A :class:`~oml_core.registry.Registry` loads the plugins when it is created (the
core's built-in plugin first, then the entry points in their installed order, then plugins given in code) and
registers every declared table and calls every hook once, the first time it is asked for a component (for each
kind: the tables, then the hooks, each in that order); ``default_registry()`` is created once per
process. Each implementation is called with its own ``register`` callback, so what a plugin registers is known to
be its own (``oml plugins`` lists it under the plugin; ``plugin:name`` names it when two plugins use one name).

**Beyond components.** :func:`oml_register_commands` adds ``oml`` subcommands and :func:`oml_register_callbacks`
Lightning callbacks of the training runs, those a run names or, registered ``every_run=True``, every run; they
are registered as the components are (kinds ``command`` and ``callback``).

**What every hook gets.** One argument, ``register``: :class:`RegisterCallback` for the component kinds,
:class:`RegisterConfigDirCallback` for :func:`oml_register_config_dirs`. A hook returns nothing.
A hook calls ``register(name, factory, aliases=(), description=None, every_run=False)`` once per component
(the registry calls it so for every row of a declared table; the config-dirs hook calls its
``register(search_path)``):
``name`` is the name configs use (``extractor: {name: my_net, args: {...}}``), ``factory`` a lazy
``"package.module:attr"`` string, imported only when the component is built or described, so that ``oml
plugins`` stays fast and a missing optional dependency matters only when its component is used (or, where no
string can name it, the callable itself).

**How components are built.** ``registry.build(kind, {name, args})`` calls ``factory(**args, **runtime)``:
``args`` come from the config (their types are checked against the factory's annotations before anything runs;
a nested ``{name, args}`` argument named after a kind, e.g. ``miner:``, is built first), ``runtime`` are the
arguments only the pipeline knows (an optimizer's ``params``), listed in each hook below. A factory that does not
name a runtime argument that the hook calls *offered* is simply not given it. The built object must satisfy the
kind's interface (checked: a class registered directly must subclass it, and the built object must be an
instance of it). A config names registered components only: an argument that takes a function or another
component is annotated ``Annotated[..., ComponentOf(kind)]`` (:class:`~oml_core.registry.kinds.ComponentOf`) and
gets the registered name built; a ``"module:attr"`` string among the config's ``args`` is refused, never imported.

**Default configs.** A component whose default arguments should be selectable from the command line
(``oml train extractor.name=my_net`` or ``extractor@extractor=my_net``) ships ``configs/<kind>/<name>.yaml``
holding ``{name: <name>, args: {...}}`` inside the package, registers the folder with
:func:`oml_register_config_dirs` (``"pkg://my_pkg.configs"``; the folder needs an ``__init__.py``) and lists the
yaml files as package data, so that the wheel holds them.

**Errors.** A hook that oml does not define (a misspelt or singular name: ``oml_register_extractor``), a
function named ``oml_register_*`` without ``@hookimpl``, a wrapper (``@hookimpl(wrapper=True)`` or
``hookwrapper=True``: oml calls every implementation with its own callback, never as a wrapper), a hook that
raises, a ``register`` call (or a row of ``OML_COMPONENTS``) with a bad name or factory, or a declaration that is
not a tuple of rows of oml's kinds (``OML_CONFIG_DIRS``: of strings) or an ``OML_*`` name spelt close to one
(``OML_COMPONENT``) makes the whole plugin fail to load: it is skipped with
a warning naming it (``OML_STRICT_PLUGINS=1``: an error), and ``oml plugins --check`` exits 1. ``tryfirst``,
``trylast`` and ``specname`` work as in pluggy.

The guide for plugin authors, with every kind's interface and the testing recipe, is ``docs/plugins.md``;
``oml plugin new NAME`` writes a working plugin to start from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from oml_core.markers import hookspec


class RegisterCallback(Protocol):
    """The ``register`` callback passed to every ``oml_register_*`` hook but the config-dirs one: the hook calls it
    once per component (the registry calls it so for every row of the plugin's ``OML_COMPONENTS`` of the kind).

    Args:
        name: The component's name in configs and in ``registry.build``: a non-empty string without ``:``.
        factory: A callable building the component from its arguments (a class, or a function), or a lazy
            ``"package.module:attr"`` string naming one.
        aliases: Other names for the same component (OML's old names, short forms).
        description: One line shown by ``oml registry`` and ``oml plugins``.
        every_run: Add the component to every training run (a callback only: see
            :func:`oml_register_callbacks`); the ``Component`` row's ``every_run``.

    Raises:
        ValueError: a bad ``name``; ``every_run=True`` for a kind other than ``callback`` (``loss 'x' of plugin
            P (dist 1.0): only a callback can be added to every training run (every_run=True), not a loss``).
        TypeError: a ``factory`` that is neither callable nor ``"module:attr"``; an ``every_run`` not a bool.
        DuplicateRegistrationError: the plugin registers a name (or alias) of the kind twice.
        InterfaceError: a class registered directly that does not subclass the kind's interface.
    """

    def __call__(
        self,
        name: str,
        factory: Callable[..., Any] | str,
        *,
        aliases: Sequence[str] = (),
        description: str | None = None,
        every_run: bool = False,
    ) -> None: ...


class RegisterConfigDirCallback(Protocol):
    """The ``register`` callback of :func:`oml_register_config_dirs`.

    ``search_path`` is a hydra search-path entry: ``"pkg://my_pkg.configs"`` or ``"file:///abs/dir"``.
    """

    def __call__(self, search_path: str) -> None: ...


@hookspec
def oml_register_extractors(register: RegisterCallback) -> None:
    """Register extractors: models that map a batch of inputs to embeddings (config key ``extractor``).

    The built object must be an :class:`~oml_core.interfaces.models.IExtractor`: ``forward(x)`` maps ``[B, ...]``
    inputs (``[B, 3, H, W]`` images from the image datasets) to ``[B, feat_dim]`` embeddings, and the property
    ``feat_dim`` gives their size.

    ``weights`` is an argument of every extractor (``null``, a checkpoint file such as ``oml train``'s
    ``best.ckpt``, or a zoo key). A factory that does not name it gets none: the core loads them into the built
    extractor with :func:`oml_core.zoo.weights.load_weights`. A factory that names it loads them itself.
    No runtime arguments. ``oml train`` with ``freeze_n_epochs > 0`` also needs
    :class:`~oml_core.interfaces.models.IFreezable`.
    """


@hookspec
def oml_register_pairwise_models(register: RegisterCallback) -> None:
    """Register pairwise models: models scoring pairs of inputs, trained as re-rankers by ``oml train
    postprocessor`` (config key ``pairwise_model``).

    The built object must be an :class:`~oml_core.interfaces.models.IPairwiseModel`: ``forward(x1, x2)`` gives
    ``[B]`` logits during training, ``predict(x1, x2)`` the scores at inference (lower is closer, as distances).
    No runtime arguments.
    """


@hookspec
def oml_register_losses(register: RegisterCallback) -> None:
    """Register losses (config key ``criterion``).

    The built object must be a ``torch.nn.Module`` whose ``forward(features, labels)`` takes ``[B, D]`` float
    embeddings and ``[B]`` int labels and returns a scalar tensor to minimise. Its parameters (proxies, an
    ArcFace head) are optimised with the extractor's. If it has an attribute ``last_logs``
    (``dict[str, float]``), training logs it after every step. Runtime argument offered: ``label2category``
    (``dict[int, int|str]`` of the training set), given only if the factory names it.
    """


@hookspec
def oml_register_miners(register: RegisterCallback) -> None:
    """Register triplet miners (built as the ``miner`` argument of a loss, e.g. ``triplet_with_miner``).

    The built object must be an :class:`~oml_core.interfaces.miners.ITripletsMiner`:
    ``sample(features, labels)`` returns the ``(anchor, positive, negative)`` rows as three tensors of equal
    length. No runtime arguments.
    """


@hookspec
def oml_register_pairs_miners(register: RegisterCallback) -> None:
    """Register pair miners: the positive and negative pairs of a batch, for training a pairwise model (config
    key ``pairs_miner`` of ``oml train postprocessor``).

    The built object must be an :class:`~oml_core.interfaces.miners.IPairsMiner`: ``sample(features, labels)``
    returns ``(ids1, ids2, is_negative)``. No runtime arguments.
    """


@hookspec
def oml_register_samplers(register: RegisterCallback) -> None:
    """Register batch samplers (config key ``sampler``).

    The built object must be an :class:`~oml_core.interfaces.samplers.IBatchSampler`: ``__iter__`` yields
    lists of dataset indices (one list per batch) and ``__len__`` is the number of batches of an epoch.
    Runtime arguments offered, each given only if the factory names it: ``labels`` (the training set's labels,
    in dataset order), ``label2category`` and ``generator`` (a seeded ``torch.Generator``; a sampler drawing
    from it is reproducible and resumes exactly after a killed run). A ``seed`` in the config's args replaces
    ``generator``.
    """


@hookspec
def oml_register_optimizers(register: RegisterCallback) -> None:
    """Register optimizers (config key ``optimizer``).

    The built object must be a ``torch.optim.Optimizer``. Runtime argument: ``params``, the parameters of the
    extractor and the loss (or of the pairwise model).
    """


@hookspec
def oml_register_schedulers(register: RegisterCallback) -> None:
    """Register learning-rate schedulers (config key ``scheduling.scheduler``).

    The built object is a ``torch.optim.lr_scheduler`` scheduler (any object with ``step()`` and
    ``state_dict()`` that Lightning accepts). Runtime argument: ``optimizer``.
    """


@hookspec
def oml_register_lr_functions(register: RegisterCallback) -> None:
    """Register learning-rate functions: the factors of the ``lambda`` scheduler (config key
    ``scheduling.scheduler.args.lr_lambda``, a registered name or a ``{name, args}`` spec).

    The factory takes the function's own arguments (``warmup_epochs``, ``min_factor``, ...) and returns a
    callable ``f(epoch: int) -> float``: the learning rate of step ``epoch`` is the optimizer's initial one times
    ``f(epoch)`` (``torch.optim.lr_scheduler.LambdaLR``; ``epoch`` counts the scheduler's steps: epochs with
    ``scheduler_interval: epoch``, optimizer steps with ``step``). The function must be pure (the same factor for
    the same ``epoch``, so that a resumed run goes on as the uninterrupted one). No runtime arguments. A config
    names these functions only: a ``"module:function"`` string is never imported.
    """


@hookspec
def oml_register_transforms(register: RegisterCallback) -> None:
    """Register image transforms (config keys ``transforms_train``, ``transforms_val``, ``transforms_predict``).

    The factory returns a callable mapping a decoded image (a PIL image, or a numpy ``HxWxC`` array for a zoo
    model read with another ``imread``) to a ``[C, H, W]`` float tensor. No runtime arguments.
    """


@hookspec
def oml_register_datasets(register: RegisterCallback) -> None:
    """Register dataset components: kinds of data, one modality each (config key ``dataset`` of every pipeline;
    absent or null: ``images``, the core's, which reads OML's dataframes of images).

    The built object must be an :class:`~oml_core.interfaces.datasets.IDatasetComponent`: it gives the pipeline
    its training, validation and prediction datasets (items are dicts whose ``input_tensors`` the extractor
    takes), names the items it predicts, and checks its data before any model runs. Runtime arguments offered,
    each given only if the factory names it and the config's ``args`` do not set it: the pipeline's data keys
    ``dataset_root``, ``dataframe_name``, ``dataframe_encoding``, ``cache_size``, ``num_workers``,
    ``transforms_train``, ``transforms_val``, ``transforms_predict`` (built transforms), ``data_dir`` (prediction),
    ``check_images`` and ``show_dataset_warnings`` (training), each where the pipeline has that key, and
    ``pipeline`` (the pipeline's name, for messages)::

        class Vectors(IDatasetComponent):
            def __init__(self, dataset_root, dataframe_name, column_prefix="x"): ...

        COMPONENTS = (Component("dataset", "vectors", "my_pkg.data:Vectors", "rows of numbers"),)
        OML_COMPONENTS = COMPONENTS

        # oml train dataset.name=vectors dataset_root=/data dataframe_name=df.csv extractor.name=my_mlp ...
    """


@hookspec
def oml_register_loggers(register: RegisterCallback) -> None:
    """Register pipeline loggers (config key ``logger``).

    The built object must be an :class:`~oml_core.interfaces.loggers.IPipelineLogger`: a Lightning ``Logger``
    that also implements ``log_figure(fig, title, idx)`` and ``log_pipeline_info(cfg)``. A relative
    ``save_dir`` argument is made relative to the run directory. No runtime arguments.
    """


@hookspec
def oml_register_postprocessors(register: RegisterCallback) -> None:
    """Register retrieval post-processors (config key ``postprocessor``).

    The built object must be an :class:`~oml_core.interfaces.retrieval.IRetrievalPostprocessor`:
    ``process(retrieval_results, dataset)`` returns re-ranked ``RetrievalResults``. The pairwise pipelines give
    the model they train as the runtime argument ``pairwise_model``, which such a post-processor must name.
    """


@hookspec
def oml_register_retrieval_metrics(register: RegisterCallback) -> None:
    """Register per-query retrieval metrics, computed by name by ``calc_retrieval_metrics`` (and by the
    pipelines when ``metric_args`` holds ``<name>_top_k: [...]``).

    The factory is the metric function itself, called as ``f(gt_tops, n_gts, top_k, **context)`` and returning
    ``list[FloatTensor]``, one ``[n_queries]`` tensor of per-query values for every ``k`` in ``top_k``, as
    :func:`~oml_core.functional.metrics.calc_cmc`. ``gt_tops[i]`` is the 1-D bool tensor of which items
    retrieved for query ``i`` (closest first) are relevant, ``n_gts[i]`` how many relevant items the gallery
    holds. Context keywords (``verbose``, ``n_gallery``) are passed only if the function names them. The mean
    over queries (``nanmean``: a ``nan`` skips a query) is reported as ``<category>/<name>/<k>``.
    """


@hookspec
def oml_register_knn_backends(register: RegisterCallback) -> None:
    """Register k-nearest-neighbour backends: factories of :class:`~oml_core.interfaces.knn.IKnnIndex`.

    A factory takes ``distance`` (``"l2"`` or ``"cosine"``) and its own parameters and returns an empty index;
    retrieval adds the gallery to it and searches it, with the exclusion contract of ``IKnnIndex`` (a query
    never retrieves an item of its own group). The core registers ``exact``; oml-faiss adds faiss's indexes.
    """


@hookspec
def oml_register_pretrained(register: RegisterCallback) -> None:
    """Register checkpoints of the pretrained zoo (``weights: <key>``, ``<Extractor>.from_pretrained(key)``).

    The factory returns a :class:`~oml_core.zoo.PretrainedModel` (the extractor's registered name, its
    constructor arguments, the url, digests, file name, transforms and converter); it must not download or import
    torch: ``oml registry pretrained`` lists the zoo by calling it. The extractor subclasses
    :class:`~oml_core.zoo.extractor.ZooExtractor`, whose ``from_pretrained`` and ``pretrained_models`` read the zoo.
    """


@hookspec
def oml_register_config_dirs(register: RegisterConfigDirCallback) -> None:
    """Register hydra search-path entries holding a plugin's default yaml configs.

    ``register(search_path)`` takes ``"pkg://my_pkg.configs"`` (a package: it needs an ``__init__.py``, and its
    yaml files must be package data) or ``"file:///abs/dir"``. The folder holds ``<kind>/<name>.yaml`` files,
    each ``{name: <name>, args: {...}}``: the default config of a component, used when a config switches to it
    (``extractor.name=my_net``, ``extractor@extractor=my_net``).
    """


@hookspec
def oml_register_commands(register: RegisterCallback) -> None:
    """Register ``oml`` subcommands: ``oml NAME [ARGUMENTS...]`` runs the plugin's command ``NAME``.

    The factory is called with the runtime argument ``parser``, an ``argparse.ArgumentParser`` of its own (``prog``
    ``oml NAME``, the registered ``description`` as its description, ``--traceback`` already there); it adds the
    command's arguments and returns the handler, ``handler(args: argparse.Namespace) -> int | None``, which runs the
    command with the parsed arguments and returns its exit status (None: 0)::

        def hello(parser):
            parser.add_argument("who")
            parser.add_argument("--times", type=int, default=1)
            return lambda args: print(", ".join([f"hello {args.who}"] * args.times))

        COMPONENTS = (Component("command", "hello", "my_pkg.cli:hello", "greet someone"),)
        OML_COMPONENTS = COMPONENTS  # or, known only at run time: register("hello", hello) in the hook

    **Dispatch.** oml's own commands never load a plugin to be found (``oml --version``, ``oml --help``, ``oml
    train`` ...): a plugin cannot replace one. A command name that is not oml's loads the plugins and runs the
    plugin's command of that name (``plugin:NAME`` when two plugins register it: the name alone is refused,
    naming both); else it is the one-line ``unknown command`` error, which lists the plugins' commands too.
    ``oml plugins`` (``--format json``) lists each plugin's commands, kind ``command``, beside its components.

    **Names.** A name of oml's own commands (``train``, ``plugins``, ...:
    :data:`~oml_core.registry.kinds.BUILTIN_COMMANDS`) is refused when the plugin registers it: the plugin fails to
    load, with a warning naming it and the command (``oml plugins --check`` reports it and exits 1).

    **Errors.** A bad command line (argparse's error) and the handler's user errors (a
    :class:`~oml_core.registry.errors.ConfigError` or any ``RegistryError``, an ``OSError`` on a user's path) print
    one line, ``oml NAME: error: <message>``, status 2, as every oml command does; any other exception is an
    internal error of the plugin's command (status 1, naming the command and its plugin; ``OML_TRACEBACK=1`` or
    ``--traceback`` shows the traceback).
    """


@hookspec
def oml_register_callbacks(register: RegisterCallback) -> None:
    """Register Lightning callbacks for the training runs (config key ``callbacks`` of ``oml train`` and ``oml
    train-postprocessor``: a list of ``{name, args}`` specs, default ``[]``)::

        callbacks:
          - {name: epoch_log, args: {path: epochs.txt}}

    The built object must be a ``pytorch_lightning.Callback`` (checked: a one-line error naming the callback and
    its plugin). No runtime arguments. A run's ``callbacks`` are checked before any work, as every component is
    (the names registered, the arguments fitting the factory's annotations), then built with the run's own
    callbacks and added, in the list's order, after oml's progress report and before its checkpoints (so that
    what a callback does at the end of an epoch is done when that epoch's checkpoints are written).

    **Every run.** A callback registered with ``every_run=True`` (``Component("callback", "epoch_log", ...,
    every_run=True)``) is added to every training run without the config naming it, as Lightning adds the
    callbacks of its ``lightning.pytorch.callbacks_factory`` entry points to every Trainer: built with its
    default arguments (so its factory must need none, else the run stops before any work, naming it), after
    the ``callbacks`` of the config, in the plugins' load order, then by name. A run whose ``callbacks`` names
    it adds it once, there, with the arguments given there; a run switches it off with the config key
    ``callbacks_disabled`` (a list of names: ``callbacks_disabled: [epoch_log]``), checked before any work (an
    unknown name, a callback that is not every-run, or one that ``callbacks`` names too: one line). ``oml
    plugins`` and ``oml registry callback`` mark every-run callbacks ``(every run)``. Any other kind marked
    ``every_run`` is refused: the plugin fails to load, with a warning naming it and the component.

    **Resume.** Lightning saves each callback's ``state_dict()`` in the checkpoint under its ``state_key`` (the
    class name, unless the callback overrides it) and gives it back to the callback of the same ``state_key`` of
    the resumed run (``load_state_dict``); a callback with state that a run may hold twice must override
    ``state_key`` (with its arguments), as Lightning asks. ``callbacks`` and ``callbacks_disabled`` are no run
    keys (:data:`~oml_core.lightning.pipelines.shared.resume.RUN_KEYS`): like the logger, they may differ in a
    resumed run (the run record keeps the config it was started with); the state of a callback that the resumed
    run does not have is left unused. An every-run callback's state goes and comes back as a named one's.
    """

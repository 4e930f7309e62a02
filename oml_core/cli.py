"""The ``oml`` console script.

    oml --version
    oml train|validate|predict|train-postprocessor|validate-postprocessor
        [--config-path DIR] [--config-name NAME] [--show-config | --cfg job] [hydra overrides ...]
    oml plugins [--all] [--format table|json] [--check [--timeout SECONDS]]
    oml plugin new NAME [DIR] [--kinds KIND,...]
    oml registry [KIND [NAME]] [--format table|json]
    oml mock-dataset DIR [--seed N]
    oml check-dataframe CSV [--dataset-root DIR] [--sep SEP] [--encoding ENCODING]
    oml index build [--config-path DIR] [--config-name NAME] [--show-config] [hydra overrides ...]
    oml search INDEX [QUERY... | --text TEXT...] [--dataset-root DIR] [--top-k K] [--format table|json]
        [--accelerator cpu|gpu|cuda|null] [--devices DEVICES]
    oml index add INDEX SOURCE... [--ids ID,...] [--labels LABEL,...] [--dataset-root DIR] [--accelerator ...]
        [--devices ...] [--lock-timeout SECONDS]
    oml index remove INDEX ID... [--lock-timeout SECONDS]
    oml index calibrate INDEX [--accelerator ...] [--devices ...] [--lock-timeout SECONDS]
    oml export SOURCE --output DIR [--config FILE]

A pipeline's command runs the pipeline and prints the report of its result (:mod:`oml_core.reports`: the metrics,
where the run wrote) in the run's main process; the pipelines themselves print no report.

``oml --version`` prints ``oml-core <version>``, then one line per installed plugin distribution, ``<distribution>
<version>``, from the distributions' metadata (``oml --version`` and ``oml --help`` import no plugin). ``oml COMMAND
--help`` explains a pipeline's overrides (hydra's ``KEY=VALUE``; ``GROUP@KEY=OPTION`` among them replaces a
component whole, ``loss@criterion=arcface``, see :mod:`oml_core.config.compose`), names its default config file and
ends with its config keys (:mod:`oml_core.config.reference`: each key, what it expects, its default and its doc);
``--show-config`` (hydra's ``--cfg job``, ``-c job``) prints the config as the pipeline would run it, composed with
the overrides and its interpolations resolved, as yaml, each key's doc a ``#`` comment above it, and runs nothing. A
flag in argparse's style that names a key of the pipeline's config schema is that key's override (``--max-epochs
3``, ``--max_epochs=3``: ``max_epochs=3``); any other flag is an error that says how to write it. ``oml registry
KIND NAME`` shows one component: its provider, its factory's arguments with their defaults and its default config.
``oml plugins --check`` loads each plugin and imports its components in a process of its own (a plugin that hangs
for more than ``--timeout`` seconds in one step, exits or crashes is named, see :mod:`oml_core.registry.isolation`)
and ends with a verdict, ``OK: <n> plugins, <m> components load`` or ``FAILED: <p> problems in <q> plugins (see
above)``, on stdout; with ``--format json`` stdout is the json report alone and the verdict goes to stderr.

``oml index build`` builds a gallery index (:class:`~oml_core.index.GalleryIndex`) from its default config
``index_build.yaml`` (the mock dataset, a seeded random ResNet18, the ``exact`` knn backend, a threshold
calibrated on the validation split) and the overrides, into a new ``index_dir`` that is never written over; its
items are those of its dataset component (``dataset``; images by default, any modality's plugin), or those of an
embeddings file (``embeddings=``, written by ``oml predict`` or ``embeddings_out=``), not embedded again.
``oml search INDEX QUERY...`` prints, for every query that the index's dataset component reads from the QUERY
arguments (images: a file, every image of a folder, every row of a CSV of queries in OML's format: a ``path``
column, joined to ``--dataset-root`` or the CSV's folder; or the ``--text`` strings, for an index of texts), named
by the component (images: by its path), its
``--top-k`` nearest gallery items (rank, distance, label, id, path) and, when the index is calibrated, match or no
match (distance < threshold); ``--format json`` prints ``{"index", "threshold", "queries": [{"query", "match",
"results": [...]}]}``. An index whose weights, config or model no longer match its embeddings is refused in one
line (:mod:`oml_core.index.integrity`). Both embed on one device, ``oml index build`` by its config keys
``accelerator`` and ``devices``, ``oml search`` by its options ``--accelerator`` and ``--devices`` of the same
meaning (:func:`~oml_core.engine.one_device`; the CPU by default); the index and the answers are the same on any.
``oml index add INDEX SOURCE...`` embeds the items of SOURCE (read as ``oml search`` reads queries) and puts them
into the index (``--ids``: theirs, an id the index has replaces its item; default: new ids; ``--labels``: theirs,
default unknown), ``oml index remove
INDEX ID...`` removes items by id (an unknown id is one line naming it, nothing removed), ``oml index calibrate
INDEX`` calibrates the match threshold again on the validation split (a change of the gallery marks it stale, as
``oml search`` then says): each writes a new generation of the index atomically and durably before it prints one
line (``added N, updated M, generation G``; :mod:`oml_core.index.generations`), waiting ``--lock-timeout`` seconds
for another process that changes the index.

``oml export SOURCE --output DIR`` writes the extractor of a checkpoint of ``oml train`` (its config: ``--config``
or the one the checkpoint records), of an index folder or of a zoo key to ONNX in the new folder ``DIR``:
``model.onnx`` (dynamic batch axis), ``export.json`` (inputs, the preprocessing a caller applies, the sha256 of the
weights, the parity figures) and the files of the preprocessing (a tokenizer); the graph is checked against PyTorch
on onnxruntime first, and refused with both figures when they differ (:mod:`oml_core.export`). The registered
extractor ``onnx`` runs it (``extractor@extractor=onnx extractor.args.path=DIR``).

``oml check-dataframe CSV`` prints the summary of a csv in OML's format (text in ``--encoding``, utf-8 by
default), with a warning for what it cannot serve: without train rows it is usable for validate/predict only; it
exits 1 with the problems of one that is not.

``oml plugin new NAME [DIR]`` writes a working plugin distribution to ``DIR`` (default ``./NAME``): its
pyproject with the entry point, the plugin module, one component of each ``--kinds`` (default: an extractor, a
loss, a retrieval metric and a dataset component), their default configs, a README and passing tests
(:mod:`oml_core.scaffold`).

Every command takes ``--traceback`` (before or after the command's name). Errors are printed on one line of
stderr, never as a traceback (``OML_TRACEBACK=1`` or ``--traceback`` re-raises them, for debugging):

- an error a user can fix exits with status 2, ``oml COMMAND: error: <message>``: a bad command line (an
  unknown command, ``oml: error: unknown command 'trian'; did you mean 'train'? (commands: ...)``, an unknown
  option or choice, without argparse's usage), a bad config, override or yaml file, an unknown or missing
  component (:class:`~oml_core.registry.RegistryError`), a bad dataframe, checkpoint or download, and an
  ``OSError`` on a user's path (permission, missing file or folder, a file where a folder should be, a full
  disk), which names the path and the system's reason;
- a run stopped on purpose exits with its own status: Ctrl-C or SIGTERM during training 130 or 143, ``oml
  train: <why>; to go on: oml train <the same arguments> resume=<last checkpoint>``; a loss gone NaN 1,
  ``oml train: <the step, loss and learning rate>; last good checkpoint: <path>``;
  a Ctrl-C anywhere else exits with 130, ``oml COMMAND: interrupted``;
- any other exception is a bug of oml or a plugin: status 1, ``oml COMMAND: internal error: <Type>: <message>
  (run with OML_TRACEBACK=1 for the traceback)``, which names the component and its plugin when a component's
  constructor raised it (one built for a config key is a user error naming the key).

When the reader of stdout goes away (``oml registry --format json | head -1``), the command stops quietly
with status 1, as Python's documentation recommends (see :func:`_stdout_closed`).
"""

from __future__ import annotations

import argparse
import difflib
import errno
import inspect
import json
import math
import os
import shlex
import sys
import textwrap
import warnings
from collections.abc import Callable, Collection, Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from oml_core.config.compose import (
    OML_CONFIGS_DIR,
    OVERRIDE_GRAMMAR_URL,
    compose_config,
    unresolvable_config_error,
)
from oml_core.engine import ONE_DEVICE_ACCELERATORS, one_device
from oml_core.lightning.quiet import silence_upstream_warnings
from oml_core.registry import KINDS, ConfigError, Registry, RegistryError, UnknownNameError
from oml_core.registry.isolation import DEFAULT_TIMEOUT, check_plugins
from oml_core.registry.manager import allow_list_from_env, installed_distributions, strict_from_env
from oml_core.registry.plugin_rows import plugins_report
from oml_core.registry.registry import EVERY_RUN_KIND, FAILED_COMPONENT_ATTR, failed_component
from oml_core.utils.text import one_line

if TYPE_CHECKING:
    import torch

    from oml_core.lightning.stops import TrainingStopped

EXIT_USAGE = 2
#: The status of a bug (an exception that is no user error), and of a closed stdout (Python's own for EPIPE).
EXIT_INTERNAL = 1
#: The status of a Ctrl-C: ``128 + SIGINT``, the shell's convention.
EXIT_INTERRUPTED = 130
#: Set to 1 (or true, yes, on), the CLI shows the traceback of every error, as ``--traceback`` does.
TRACEBACK_ENV = "OML_TRACEBACK"
#: ``OSError`` types that mean a user's path is wrong (the message names the path), and the error numbers of
#: other ``OSError`` s that the user can fix: a full disk or quota, a read-only file system, a too long name.
USER_OS_ERRORS = (FileNotFoundError, FileExistsError, PermissionError, NotADirectoryError, IsADirectoryError)
USER_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.ENAMETOOLONG})
#: oml's exceptions that are user errors, beside ``RegistryError``: ``(module, class name)``. They are looked
#: up among the modules already imported (an error of a module never imported was never raised), so that the
#: CLI imports neither torch nor pandas to tell them apart.
USER_ERROR_TYPES = (
    ("oml_core.utils.checkpoints", "CheckpointError"),
    ("oml_core.utils.digest", "CorruptCheckpointError"),
    ("oml_core.datasets.dataframe_format", "DataFrameFormatError"),
    ("oml_core.zoo.store", "PretrainedDownloadError"),
    ("oml_core.index.errors", "GalleryIndexError"),
    ("oml_core.export.errors", "ExportError"),
    ("oml_core.scaffold", "PluginScaffoldError"),
)
#: The exception of a run stopped on purpose: it carries its last good checkpoint (``checkpoint``), whether the
#: run goes on from it as it was (``resumable``) and its exit status (``exit_code``). Looked up as
#: :data:`USER_ERROR_TYPES` are.
STOPPED_TYPE = ("oml_core.lightning.stops", "TrainingStopped")
#: The default config of ``oml index build`` (in :data:`~oml_core.config.compose.OML_CONFIGS_DIR`).
INDEX_BUILD_CONFIG = "index_build"
#: ``oml COMMAND`` -> the pipeline it runs; its default config has the pipeline's name (as OML's do).
PIPELINE_CONFIGS = {
    "train": "extractor_training_pipeline",
    "validate": "extractor_validation_pipeline",
    "predict": "extractor_prediction_pipeline",
    "train-postprocessor": "postprocessor_training_pipeline",
    "validate-postprocessor": "postprocessor_validation_pipeline",
}
PIPELINE_HELP = {
    "train": "train an extractor (defaults: the built-in mock dataset)",
    "validate": "compute the retrieval metrics of an extractor (defaults: the built-in mock dataset)",
    "predict": "save an extractor's features of every image to predictions.json, or as Parquet or .npy "
    "(predictions_format; defaults: the mock images)",
    "train-postprocessor": "train a pairwise re-ranker on top of an extractor (defaults: the mock dataset)",
    "validate-postprocessor": "compute the retrieval metrics before and after a pairwise re-ranker "
    "(defaults: the mock dataset)",
}
#: The examples of a pipeline's ``--help`` (keys of its own default config, so that each one composes):
#: ``value``, ``nested``, ``list``, ``null``: one override each; ``replace``: command lines that replace a
#: component (``GROUP@KEY=OPTION``, then overrides under KEY); ``switch``: ``KEY.name=OTHER``.
PIPELINE_EXAMPLES: dict[str, dict[str, Any]] = {
    "train": {
        "value": "max_epochs=3",
        "nested": "optimizer.args.lr=0.5",
        "list": "tags=[a,b]",
        "null": "sampler=null",
        "replace": (
            "loss@criterion=arcface criterion.args.in_features=512 criterion.args.num_classes=16",
            "miner@criterion.args.miner=hard_triplets",
            "optimizer@optimizer=sgd optimizer.args.lr=0.01",
        ),
        "switch": "extractor.name=vit",
        "inline": "optimizer={name: sgd, args: {lr: 0.01, momentum: 0.9}}",
    },
    "validate": {
        "value": "bs_val=32",
        "nested": "extractor.args.arch=resnet50",
        "list": "tags=[a,b]",
        "null": "logger=null",
        "replace": (
            "extractor@extractor=vit extractor.args.arch=vits8",
            "postprocessor@postprocessor=pairwise_reranker",
        ),
        "switch": "extractor.name=vit",
        "inline": "transforms_val={name: norm_resize, args: {im_size: 64}}",
    },
    "predict": {
        "value": "bs=32",
        "nested": "extractor.args.arch=resnet50",
        "list": "devices=[0]",
        "null": "extractor.args.weights=null",
        "replace": (
            "extractor@extractor=vit extractor.args.arch=vits8",
            "transforms@transforms_predict=norm_resize_torch",
        ),
        "switch": "extractor.name=vit",
        "inline": "transforms_predict={name: norm_resize, args: {im_size: 64}}",
    },
    "train-postprocessor": {
        "value": "max_epochs=3",
        "nested": "optimizer.args.lr=0.5",
        "list": "tags=[a,b]",
        "null": "sampler=null",
        "replace": (
            "pairwise_model@pairwise_model=linear_siamese pairwise_model.args.feat_dim=512",
            "sampler@sampler=category_balance",
        ),
        "switch": "pairwise_model.name=linear_siamese",
        "inline": "optimizer={name: sgd, args: {lr: 0.01, momentum: 0.9}}",
    },
    "validate-postprocessor": {
        "value": "bs_val=32",
        "nested": "postprocessor.args.top_n=3",
        "list": "tags=[a,b]",
        "null": "logger=null",
        "replace": (
            "pairwise_model@postprocessor.args.pairwise_model=linear_siamese",
            "extractor@extractor=vit extractor.args.arch=vits8",
        ),
        "switch": "extractor.name=vit",
        "inline": "transforms_val={name: norm_resize, args: {im_size: 64}}",
    },
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``oml`` console script; returns the exit status (see the module's docstring)."""
    silence_upstream_warnings()
    parser = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    given = _command_name(argv)
    if given is not None and given not in parser.commands:
        return _run_plugin_command(given, argv, parser.commands)
    try:
        args, rest = parser.parse_known_args(argv)
    except SystemExit as e:  # --help (0) or a bad command line (2, reported on one line by _Parser.error)
        return _flushed(e.code if isinstance(e.code, int) else EXIT_USAGE)
    except BrokenPipeError:  # --help into a closed pipe
        return _stdout_closed()
    if args.version:
        args.handler, args.command = _cmd_version, None
    elif args.command is None:
        parser.print_help()
        return EXIT_USAGE
    elif rest and args.command not in PIPELINE_CONFIGS and not getattr(args, "takes_overrides", False):
        print(f"oml {args.command}: error: unrecognized arguments: {' '.join(rest)}", file=sys.stderr)
        return EXIT_USAGE
    command = "oml" if args.command is None else f"oml {args.command}"
    return _reporting_errors(command, lambda: args.handler(args, rest), args, argv)


def _reporting_errors(
    command: str, run: Callable[[], int], args: argparse.Namespace, argv: Sequence[str]
) -> int:
    """``run()``'s exit status, its errors reported on one line of stderr after ``command`` (``oml train``), see
    :func:`error_report` (re-raised when ``args`` ask for the traceback, :func:`wants_traceback`)."""
    try:
        status = run()
        sys.stdout.flush()  # a closed stdout shows here, not at exit
        return status
    except BrokenPipeError:
        return _stdout_closed()
    except KeyboardInterrupt:
        if wants_traceback(args):
            raise
        print(f"{command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:
        if wants_traceback(args):
            raise
        message, status = error_report(e, argv)
        print(f"{command}: {message}", file=sys.stderr)
        return status


def _flushed(status: int) -> int:
    """``status``, after flushing stdout (the help argparse printed); a closed stdout ends quietly."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        return _stdout_closed()
    return status


def _command_name(argv: Sequence[str]) -> str | None:
    """The command of a command line: its first argument that is no option (None: there is none)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def unknown_command(given: str, commands: Sequence[str], plugin_commands: Sequence[str] = ()) -> str:
    """The message for the command ``given`` that is none of oml's ``commands`` nor of the ``plugin_commands``:
    ``unknown command 'trian'; did you mean 'train'? (commands: ...; plugin commands: ...)``."""
    close = difflib.get_close_matches(given, [*commands, *plugin_commands], n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    listed = f"; plugin commands: {', '.join(plugin_commands)}" if plugin_commands else ""
    return f"unknown command {given!r}{hint} (commands: {', '.join(commands)}{listed})"


def _run_plugin_command(name: str, argv: Sequence[str], commands: Sequence[str]) -> int:
    """Run ``oml ... NAME ...``, where ``NAME`` is none of oml's ``commands``: the plugins are loaded and the
    command ``NAME`` that one registered (``oml_register_commands``; ``plugin:NAME`` names one of two) gets its own
    parser (``oml NAME``, with ``--traceback``) from its factory, which returns the handler, called with the
    arguments parsed (those before ``NAME`` too); its status (None: 0) is the exit status. Errors are reported as
    every command's are (:func:`error_report`); a name no plugin registered is the one-line ``unknown command``
    error, listing the plugins' commands."""
    args = argparse.Namespace()
    position = list(argv).index(name)
    arguments = [*argv[:position], *argv[position + 1 :]]

    def run() -> int:
        registry = Registry()
        try:
            entry = registry.get("command", name)
        except UnknownNameError:
            print(
                f"oml: error: {unknown_command(name, commands, registry.names('command'))}", file=sys.stderr
            )
            return EXIT_USAGE
        parser = _Parser(prog=f"oml {entry.name}", description=entry.description, parents=[_common_parser()])
        handler = registry.build("command", entry.qualified_name, parser=parser)
        try:
            parser.parse_args(arguments, namespace=args)
        except SystemExit as e:  # --help (0) or a bad command line (2, reported on one line by _Parser.error)
            return _flushed(e.code if isinstance(e.code, int) else EXIT_USAGE)
        try:
            status = handler(args)
        except Exception as e:  # a bug of the plugin's command is named as such (a user error stays one)
            if not is_user_error(e) and failed_component(e) is None:
                setattr(e, FAILED_COMPONENT_ATTR, entry)
            raise
        return 0 if status is None else int(status)

    return _reporting_errors(f"oml {name}", run, args, argv)


def wants_traceback(args: argparse.Namespace) -> bool:
    """Whether errors are to be re-raised with their traceback: ``--traceback`` or ``OML_TRACEBACK=1``."""
    from_env = os.environ.get(TRACEBACK_ENV, "").strip().lower() in {"1", "true", "yes", "on"}
    return from_env or getattr(args, "traceback", False)


def error_report(error: Exception, argv: Sequence[str]) -> tuple[str, int]:
    """The one line (after ``oml COMMAND: ``) and the exit status that the CLI gives ``error``, raised by the
    command ``oml ARGV``.

    ``error: <message>`` and :data:`EXIT_USAGE` for a user error (see :func:`is_user_error`); for a run stopped
    on purpose, its message, the command that resumes it (:func:`resume_command`) and its own ``exit_code``;
    else ``internal error: <Type>: <message> (run with OML_TRACEBACK=1 for the traceback)`` and
    :data:`EXIT_INTERNAL`, naming the component and its plugin when a component's factory raised ``error``
    (:func:`~oml_core.registry.registry.failed_component`).
    """
    # STOPPED_TYPE names TrainingStopped, looked up without importing Lightning
    stopped = cast("type[TrainingStopped] | None", _loaded_type(*STOPPED_TYPE))
    if stopped is not None and isinstance(error, stopped):
        if error.resumable and error.checkpoint is not None:
            return one_line(f"{error}; to go on: {resume_command(argv, error.checkpoint)}"), error.exit_code
        return one_line(str(error)), error.exit_code
    if is_user_error(error):
        text = _os_error_text(error) if isinstance(error, OSError) else str(error)
        return f"error: {one_line(text)}", EXIT_USAGE
    detail = one_line(str(error))
    described = f"{type(error).__name__}: {detail}" if detail else type(error).__name__
    failed = failed_component(error)  # raised by a component's factory that no config key's build named
    if failed is not None:
        plugin = failed.plugin.provider
        failure = "failed" if failed.kind == "command" else "failed to build"  # a command: built or run
        described = f"the {failed.kind} {failed.name!r} of the plugin {plugin} {failure}: {described}"
    return f"internal error: {described} (run with {TRACEBACK_ENV}=1 for the traceback)", EXIT_INTERNAL


def is_user_error(error: BaseException) -> bool:
    """Whether ``error`` is one a user can fix: a ``RegistryError`` (``ConfigError`` among them), one of
    :data:`USER_ERROR_TYPES`, or an ``OSError`` of :data:`USER_OS_ERRORS` or :data:`USER_ERRNOS`."""
    if isinstance(error, OSError):
        return isinstance(error, USER_OS_ERRORS) or error.errno in USER_ERRNOS
    user_types = (_loaded_type(module, name) for module, name in USER_ERROR_TYPES)
    return isinstance(error, (RegistryError, *(t for t in user_types if t is not None)))


def resume_command(argv: Sequence[str], checkpoint: str | os.PathLike[str]) -> str:
    """``oml ARGV resume=CHECKPOINT``, shell-quoted, where ARGV loses the overrides of ``resume`` it had."""
    kept = [arg for arg in argv if arg.lstrip("+").partition("=")[0] != "resume"]
    return shlex.join(["oml", *kept, f"resume={os.fspath(checkpoint)}"])


def _loaded_type(module: str, name: str) -> type[BaseException] | None:
    """The class ``module.name`` if ``module`` is imported already, else None (nothing is imported)."""
    loaded = sys.modules.get(module)
    return getattr(loaded, name, None) if loaded is not None else None


def _os_error_text(error: OSError) -> str:
    """``<the system's reason>: '<path>'`` (``'<path>' -> '<path2>'`` for a rename) of an ``OSError`` raised by
    the system; the message of one raised with a message of its own."""
    if error.strerror is None:
        return str(error)
    paths = " -> ".join(repr(path) for path in (error.filename, error.filename2) if path is not None)
    return f"{error.strerror}: {paths}" if paths else error.strerror


def _stdout_closed() -> int:
    """What Python's documentation recommends when the reader of stdout has gone (``BrokenPipeError``, see
    "Note on SIGPIPE" in the docs of :mod:`signal`): point stdout at devnull, so that the flush at exit does not
    fail again, and end with status 1, Python's own for EPIPE, without a message."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return EXIT_INTERNAL


class _Parser(argparse.ArgumentParser):
    """argparse's parser whose errors are one line, ``oml COMMAND: error: <message>``, exit status 2 (no usage:
    ``oml COMMAND --help`` shows it); ``commands`` are the names of the commands (set on the top parser). The help
    of a parser given ``config_keys_of`` (a pipeline's name, or ``index_build``) ends with the "config keys"
    section of that schema (:func:`~oml_core.config.reference.help_section`), written when the help is shown, so
    that building the parser imports no schema."""

    commands: list[str]

    def __init__(self, *args: Any, config_keys_of: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.config_keys_of = config_keys_of

    def error(self, message: str) -> Any:  # argparse's signature: NoReturn
        self.exit(EXIT_USAGE, f"{self.prog}: error: {one_line(message)}\n")

    def format_help(self) -> str:
        if self.config_keys_of is None:
            return super().format_help()
        from oml_core.config.reference import help_section

        return f"{super().format_help()}\n{help_section(self.config_keys_of)}"


def _common_parser() -> _Parser:
    """The parent of every command's parser (which are _Parsers, as argparse types them): ``--traceback``."""
    common = _Parser(add_help=False)
    # SUPPRESS: a command that is not given the flag leaves the one given before the command's name as it is
    common.add_argument(
        "--traceback",
        action="store_true",
        default=argparse.SUPPRESS,
        help=f"show the traceback of an error (as {TRACEBACK_ENV}=1 does)",
    )
    return common


def _parser() -> _Parser:
    common = _common_parser()
    parser = _Parser(
        prog="oml",
        description="oml: metric learning with plugins",
        epilog="plugins add commands of their own: `oml plugins` lists them (as 'command'); run one as "
        "oml NAME [ARGUMENTS ...] (oml NAME --help)",
        parents=[common],
    )
    parser.add_argument(
        "--version",
        action="store_true",
        help="print the versions of oml-core and of the installed plugin distributions",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    for command, config_name in PIPELINE_CONFIGS.items():
        pipeline = sub.add_parser(
            command,
            help=PIPELINE_HELP[command],
            description=f"oml {command}: {PIPELINE_HELP[command]}. Options, then hydra overrides.",
            epilog=pipeline_epilog(command),
            formatter_class=argparse.RawDescriptionHelpFormatter,
            parents=[common],
            config_keys_of=config_name,
        )
        pipeline.add_argument(
            "--config-path", "-cp", metavar="DIR", help="directory of your yaml configs (default: oml's own)"
        )
        pipeline.add_argument(
            "--config-name",
            "-cn",
            metavar="NAME",
            default=config_name,
            help=f"config name without .yaml (default: {config_name})",
        )
        pipeline.add_argument(
            "--show-config",
            action="store_true",
            help="print the config composed with the overrides (interpolations resolved) as yaml; run nothing",
        )
        pipeline.add_argument(
            "--cfg",
            "-c",
            choices=("job",),
            help="hydra's spelling of --show-config (--cfg job)",
        )
        if command == "train":
            pipeline.add_argument(
                "--skip-image-check",
                action="store_true",
                help="do not read every image before training (the override check_images=false)",
            )
        pipeline.set_defaults(handler=_cmd_pipeline)

    plugins = sub.add_parser(
        "plugins", help="list the installed plugins and what they provide", parents=[common]
    )
    plugins.add_argument("--all", action="store_true", help="include the core's built-in plugin")
    plugins.add_argument("--format", choices=("table", "json"), default="table")
    plugins.add_argument(
        "--check",
        action="store_true",
        help="load each plugin and import its components in a process of its own, and end with a verdict (with "
        "--format json: on stderr); exit 1 on any failure (a plugin that fails, hangs, exits or crashes)",
    )
    plugins.add_argument(
        "--timeout",
        type=_positive_seconds,
        metavar="SECONDS",
        help=f"with --check: the time one step of loading a plugin (its import, a hook, a component's import) may "
        f"take before the plugin is reported as hung (default: {DEFAULT_TIMEOUT:g})",
    )
    plugins.set_defaults(handler=_cmd_plugins)

    plugin = sub.add_parser(
        "plugin", help="write a new plugin to start from (oml plugin new)", parents=[common]
    )
    plugin_sub = plugin.add_subparsers(dest="plugin_command", metavar="PLUGIN_COMMAND", required=True)
    new = plugin_sub.add_parser(
        "new",
        help="write a working plugin distribution: pyproject, plugin module, components, configs, tests",
        description="oml plugin new: write the plugin distribution NAME (e.g. oml-acme, package oml_acme) to DIR "
        "(default ./NAME): its pyproject.toml with the oml entry point and package data, the plugin module, one "
        "component of each kind asked for with its default config, py.typed, a README and tests that pass. "
        "Then: pip install -e DIR; pytest DIR; oml plugins.",
        parents=[common],
    )
    new.add_argument("name", metavar="NAME", help="the distribution's name, e.g. oml-acme")
    new.add_argument(
        "dir", nargs="?", type=Path, metavar="DIR", help="a new or empty folder (default: ./NAME)"
    )
    new.add_argument(
        "--kinds",
        default=None,
        metavar="KIND,...",
        help="the components to write, comma-separated: extractor, loss, retrieval_metric, dataset (a dataset "
        "component: rows of numbers in a CSV of OML's format, a start for a modality of one's own) (default: all "
        "four)",
    )
    new.set_defaults(handler=_cmd_plugin_new, command="plugin new")

    registry = sub.add_parser(
        "registry",
        help="list registered names, by kind; or show one component",
        description="oml registry: the registered names of every kind, of one KIND (with details), or one "
        "component (KIND NAME): its provider, its factory's arguments with their defaults, its default config.",
        parents=[common],
    )
    registry.add_argument(
        "kind", nargs="?", type=_kind, metavar="KIND", help=f"only this kind: {', '.join(KINDS)}"
    )
    registry.add_argument("name", nargs="?", metavar="NAME", help="one component of KIND (or an alias)")
    registry.add_argument("--format", choices=("table", "json"), default="table")
    registry.set_defaults(handler=_cmd_registry)

    mock = sub.add_parser(
        "mock-dataset", help="generate the mock 'figures' dataset into DIR", parents=[common]
    )
    mock.add_argument("dir", type=Path)
    mock.add_argument("--seed", type=int, default=0)
    mock.set_defaults(handler=_cmd_mock_dataset)

    check = sub.add_parser(
        "check-dataframe",
        help="check that a csv is in OML's retrieval format; exit 1 with the problems if not",
        parents=[common],
    )
    check.add_argument("csv", type=Path)
    check.add_argument(
        "--dataset-root",
        type=Path,
        help="the folder the relative paths are joined to (default: the csv's folder)",
    )
    check.add_argument("--sep", default=",", help="the csv's separator (default: ',')")
    check.add_argument(
        "--encoding",
        default="utf-8",
        help="the csv's text encoding, e.g. latin-1 or cp1252 (default: utf-8; the pipelines' dataframe_encoding)",
    )
    check.set_defaults(handler=_cmd_check_dataframe)

    index = sub.add_parser(
        "index",
        help="build a gallery index to serve, or change one (oml index build|add|remove|calibrate)",
        parents=[common],
    )
    index_sub = index.add_subparsers(dest="index_command", metavar="INDEX_COMMAND", required=True)
    build = index_sub.add_parser(
        "build",
        help="build a gallery index from a dataframe or a folder of images (defaults: the mock dataset)",
        description="oml index build: embed a gallery with an extractor, put it in a knn backend, calibrate a "
        "match threshold on the validation split and save it all to a new folder. Options, then hydra "
        "overrides, e.g. oml index build index_dir=my_index extractor.args.weights=best.ckpt "
        "knn_backend.name=exact calibration.value=0.95",
        epilog=f"the default config: {(OML_CONFIGS_DIR / f'{INDEX_BUILD_CONFIG}.yaml').resolve()}",
        parents=[common],
        config_keys_of=INDEX_BUILD_CONFIG,
    )
    build.add_argument("--config-path", "-cp", metavar="DIR", help="directory of your yaml configs")
    build.add_argument(
        "--config-name",
        "-cn",
        metavar="NAME",
        default=INDEX_BUILD_CONFIG,
        help=f"config name without .yaml (default: {INDEX_BUILD_CONFIG})",
    )
    build.add_argument(
        "--show-config",
        action="store_true",
        help="print the config composed with the overrides (interpolations resolved) as yaml; build nothing",
    )
    build.set_defaults(handler=_cmd_index_build, command="index build", takes_overrides=True)
    add = index_sub.add_parser(
        "add",
        help="add items to an index, or replace those of the same ids (durable when it prints)",
        description="oml index add: embed the items of SOURCE as the index's dataset component reads queries "
        "and put them into the index by id; prints: added N, updated M, generation G",
        parents=[common],
    )
    add.add_argument("index", type=Path, metavar="INDEX", help="the folder of an index (oml index build)")
    add.add_argument(
        "sources",
        nargs="+",
        metavar="SOURCE",
        help="the items, as oml search reads queries (images: image files, folders of images, CSVs of OML's "
        "format; texts: CSVs with a text column, or text files, an item a line)",
    )
    add.add_argument(
        "--ids",
        type=_id_list,
        metavar="ID,...",
        help="the items' ids, one per item in order (an id the index has replaces that item); default: new "
        "ids after the largest ever given (a removed item's id is never given again)",
    )
    add.add_argument(
        "--labels",
        type=_label_list,
        metavar="LABEL,...",
        help="the items' labels, one per item in order (an empty one: unknown); default: unknown",
    )
    add.add_argument(
        "--dataset-root",
        type=Path,
        metavar="DIR",
        help="the folder the relative paths inside a CSV are joined to (default: its folder)",
    )
    add_one_device_arguments(add, "embeds the items")
    _add_lock_timeout(add)
    add.set_defaults(handler=_cmd_index_add, command="index add")
    remove = index_sub.add_parser(
        "remove",
        help="remove items from an index by id (durable when it prints)",
        description="oml index remove: remove the items of the ids from the index; prints: removed N, "
        "generation G",
        parents=[common],
    )
    remove.add_argument("index", type=Path, metavar="INDEX", help="the folder of an index (oml index build)")
    remove.add_argument("ids", nargs="+", type=_item_id, metavar="ID", help="the ids of the items to remove")
    _add_lock_timeout(remove)
    remove.set_defaults(handler=_cmd_index_remove, command="index remove")
    calibrate = index_sub.add_parser(
        "calibrate",
        help="calibrate an index's match threshold again (after changes) on its validation split",
        description="oml index calibrate: calibrate the match threshold again with the index's calibration "
        "target, on the validation split of its dataset component; prints the calibration and the generation",
        parents=[common],
    )
    calibrate.add_argument(
        "index", type=Path, metavar="INDEX", help="the folder of an index (oml index build)"
    )
    add_one_device_arguments(calibrate, "embeds the validation split")
    _add_lock_timeout(calibrate)
    calibrate.set_defaults(handler=_cmd_index_calibrate, command="index calibrate")

    search = sub.add_parser(
        "search",
        help="search a gallery index by queries (images, or its dataset's): their nearest gallery items, match or "
        "no match",
        parents=[common],
    )
    search.add_argument("index", type=Path, metavar="INDEX", help="the folder of an index (oml index build)")
    search.add_argument(
        "queries",
        nargs="*",
        metavar="QUERY",
        help="queries, as the index's dataset component reads them (images: image files, folders of images, CSVs "
        "of queries in OML's format: a path column; texts: CSVs with a text column, or text files, a query a line)",
    )
    search.add_argument(
        "--text",
        action="append",
        default=[],
        metavar="TEXT",
        help="a query text, instead of QUERY arguments (repeatable; an index of texts)",
    )
    search.add_argument(
        "--dataset-root",
        type=Path,
        metavar="DIR",
        help="the folder the relative paths inside a list of queries (a CSV) are joined to (default: its folder)",
    )
    search.add_argument(
        "--top-k", type=_positive_int, default=5, metavar="K", help="gallery items per query (default: 5)"
    )
    search.add_argument("--format", choices=("table", "json"), default="table")
    add_one_device_arguments(search, "embeds the queries")
    search.set_defaults(handler=_cmd_search)

    export = sub.add_parser(
        "export",
        help="export the extractor of a checkpoint, an index or a zoo key to ONNX (checked against PyTorch)",
        description="oml export: write the extractor of SOURCE (a checkpoint of oml train, an index folder of oml "
        "index build, or a zoo key) to ONNX in the new folder DIR: model.onnx (dynamic batch axis), export.json "
        "(inputs, preprocessing, weights sha256, parity figures) and the preprocessing's files; the graph is run "
        "on onnxruntime and compared with PyTorch before the folder appears. Run it with the extractor onnx: "
        "oml validate extractor@extractor=onnx extractor.args.path=DIR. Needs pip install 'oml-core[onnx]'.",
        parents=[common],
    )
    export.add_argument(
        "source", metavar="SOURCE", help="a checkpoint file, an index folder, or a key of the pretrained zoo"
    )
    export.add_argument(
        "--output", "-o", type=Path, required=True, metavar="DIR", help="a new or empty folder for the export"
    )
    export.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="with a checkpoint: the yaml config it was trained with, composed (as oml train --show-config prints "
        "it; its extractor, transforms_val, dataset are read); default: the config that oml train recorded in the "
        "checkpoint",
    )
    export.set_defaults(handler=_cmd_export)
    parser.commands = list(sub.choices)
    return parser


def add_one_device_arguments(parser: argparse.ArgumentParser, role: str) -> None:
    """Add ``--accelerator`` and ``--devices`` to ``parser``: the one device on which an index's extractor
    ``role`` (e.g. "embeds the queries"), as ``oml index build``'s keys ``accelerator`` and ``devices`` name it.
    :func:`device_of_arguments` turns the parsed values into a ``torch.device``; plugin commands (``oml serve``)
    take the same options through this function."""
    parser.add_argument(
        "--accelerator",
        choices=(*ONE_DEVICE_ACCELERATORS, "null"),
        default="cpu",
        help=f"where the extractor {role}, as oml index build's accelerator: cpu (default), gpu (cuda), "
        "or null: gpu when CUDA is available, else cpu; the answers are the same",
    )
    parser.add_argument(
        "--devices",
        type=_devices_value,
        default=1,
        metavar="DEVICES",
        help="the one device, as oml index build's devices: 1 (default; on gpu the first GPU), [i] "
        "(the GPU cuda:i), or null (every GPU, which must be one)",
    )


def device_of_arguments(args: argparse.Namespace, command: str) -> torch.device:
    """The ``torch.device`` of the options of :func:`add_one_device_arguments` (``--accelerator null``: CUDA when
    available); a device this machine lacks is a :class:`ValueError` naming ``command``'s option."""
    accelerator = None if args.accelerator == "null" else args.accelerator
    return one_device(accelerator, args.devices, command)


def _add_lock_timeout(parser: argparse.ArgumentParser) -> None:
    """Add ``--lock-timeout`` to a command that changes an index."""
    parser.add_argument(
        "--lock-timeout",
        type=_positive_seconds,
        default=10.0,
        metavar="SECONDS",
        help="how long to wait for another process that is changing the index (default: 10)",
    )


def _item_id(value: str) -> int:
    """An item's id, an integer (argparse's type of ``oml index remove ID``)."""
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer id, got {value!r}") from None


def _label_list(value: str) -> list[int | None]:
    """Integer labels separated by commas, an empty one unknown (argparse's type of ``oml index add --labels``)."""
    try:
        return [int(part) if part.strip() else None for part in value.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be integer labels separated by commas, got {value!r}"
        ) from None


def _id_list(value: str) -> list[int]:
    """Distinct integer ids separated by commas (argparse's type of ``oml index add --ids``)."""
    ids = [_item_id(part.strip()) for part in value.split(",")]
    if len(set(ids)) != len(ids):
        twice = next(i for i in ids if ids.count(i) > 1)
        raise argparse.ArgumentTypeError(f"the id {twice} is given twice")
    return ids


def _positive_int(value: str) -> int:
    """An integer >= 1 (argparse's type of ``--top-k``)."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value!r}")
    return number


def _devices_value(value: str) -> Any:
    """The value of ``--devices`` as a config holds it: ``1``, ``[0]``, ``null`` (argparse's type; JSON)."""
    try:
        return json.loads(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be 1, a list of one device index such as [0], or null, got {value!r}"
        ) from None


def _positive_seconds(value: str) -> float:
    """A finite number of seconds > 0 (argparse's type of ``--timeout``)."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {value!r}")
    return seconds


def _kind(value: str) -> str:
    """A kind's name (argparse's type of ``oml registry KIND``), with the close match of an unknown one."""
    if value in KINDS:
        return value
    close = difflib.get_close_matches(value, list(KINDS), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise argparse.ArgumentTypeError(f"unknown kind {value!r}{hint} (kinds: {', '.join(KINDS)})")


def pipeline_epilog(command: str) -> str:
    """The epilog of ``oml COMMAND --help`` for a pipeline: hydra's overrides, how to replace or switch a
    component (with examples on the pipeline's own keys, :data:`PIPELINE_EXAMPLES`), where the names are
    listed, and the pipeline's default config file."""
    ex = PIPELINE_EXAMPLES[command]
    default = default_config_file(command)
    replace = "\n".join(f"{'':27}oml {command} {line}" for line in ex["replace"])
    rows = (
        ("KEY=VALUE", "set a value", ex["value"]),
        ("A.B.C=VALUE", "set a nested value", ex["nested"]),
        ("KEY=[1,2]", "a list", ex["list"]),
        ("+KEY=VALUE", "add a key the config does not have", ""),
        ("~KEY", "remove a key", ""),
        ("KEY=null", "null (a component: none)", ex["null"]),
    )
    kinds = textwrap.fill(", ".join(KINDS), width=105, initial_indent=" " * 25, subsequent_indent=" " * 25)
    table = "\n".join(f"  {a:<23}{b:<37}{c}".rstrip() for a, b, c in rows)
    return f"""\
overrides: hydra's, after the options ({OVERRIDE_GRAMMAR_URL})
{table}

components (the {{name: ..., args: {{...}}}} specs of the config):
  GROUP@KEY=OPTION       KEY becomes the default config of the component OPTION of the kind GROUP,
                         whole (nothing of the old component's args is kept); the overrides under KEY
                         then apply to it, e.g.
{replace}
  'KEY={{name: NAME, args: {{ARG: VALUE}}}}'
                         a whole spec inline (quoted for the shell), e.g.
                           oml {command} '{ex["inline"]}'
  KEY.name=OTHER         switch to OTHER with OTHER's default config (the args are reset, never
                         mixed with the old component's), e.g. oml {command} {ex["switch"]}
  oml registry KIND      the names of a kind; the kinds (the GROUPs):
{kinds}
  oml registry KIND NAME one component: its arguments with their defaults and its default config

config:
  the default config     {default}
  --config-path DIR --config-name NAME
                         your own yaml instead (DIR/NAME.yaml)
  --show-config          print the config as composed with the overrides (interpolations resolved)
                         and exit without running, e.g. oml {command} --show-config {ex["value"]}
"""


def default_config_file(command: str) -> Path:
    """The absolute path of the default config of the pipeline ``oml COMMAND``."""
    return (OML_CONFIGS_DIR / f"{PIPELINE_CONFIGS[command]}.yaml").resolve()


# ---------------------------------------------------------------------------------------------- version
def _cmd_version(_: argparse.Namespace, __: list[str]) -> int:
    from oml_core import __version__

    print(f"oml-core {__version__}")
    for line in plugin_versions(allow_list_from_env()):
        print(line)
    return 0


def plugin_versions(allow: Collection[str] | None) -> list[str]:
    """``<distribution> <version>``, one line per installed plugin distribution that the allow-list ``allow``
    admits (``None``: all), in the order of their entry points' names, read from the distributions' metadata: no
    plugin is imported, so that a plugin that hangs or ends the process at import cannot take ``oml --version``
    down (``oml plugins --check`` tells whether each one loads)."""
    return [f"{distribution} {version or '?'}" for distribution, version in installed_distributions(allow)]


# -------------------------------------------------------------------------------------------- pipelines
def _cmd_pipeline(args: argparse.Namespace, overrides: list[str]) -> int:
    """Run the pipeline of ``args.command`` on its config composed with ``overrides`` (composed first, so that
    a bad config or override fails before Lightning is imported) and print its report
    (:data:`oml_core.reports.REPORTS`) in the main process of the run; with ``--show-config`` (``--cfg job``)
    print that config instead (:func:`config_yaml`) and run nothing."""
    registry = Registry()
    overrides = flags_as_overrides(args.command, overrides)
    if getattr(args, "skip_image_check", False):
        overrides = [*overrides, "++check_images=false"]  # set, or add to a config without it
    from oml_core.config.schemas import schema_of

    pipeline = PIPELINE_CONFIGS[args.command]
    schema_keys = [field.name for field in fields(schema_of(pipeline))]
    cfg = compose_config(args.config_name, overrides, args.config_path, registry, schema_keys)
    if args.show_config or args.cfg == "job":
        print(config_yaml(cfg, pipeline), end="")
        return 0
    check_before_lightning(pipeline, cfg, registry)
    from oml_core import reports  # imports the pipelines, and Lightning with them
    from oml_core.lightning import pipelines

    result = getattr(pipelines, pipeline)(cfg, registry=registry)
    # the other DDP processes (Lightning starts them as `oml COMMAND` too, torchrun as the same command) are silent
    if result.is_main_process:
        print(reports.REPORTS[pipeline](result))
    return 0


def check_before_lightning(pipeline: str, cfg: Any, registry: Registry) -> None:
    """The checks of ``pipeline``'s config that need no Lightning: its schema
    (:func:`~oml_core.config.typed.validate_config`) and its components' arguments
    (:func:`~oml_core.config.typed.check_component_arguments`), run before the pipeline's
    module, and Lightning with it (seconds of imports), is imported: a typo in a config is one line at once. The
    pipeline runs them again, and says then what they warn of (an ignored key).

    Raises:
        ConfigError: a key of the config is unknown, missing or malformed, or a component's argument is.
        RegistryError: an unknown component name or argument.
    """
    from oml_core.config.typed import check_component_arguments, validate_config

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # said once, by the pipeline
        check_component_arguments(validate_config(cfg, pipeline), registry)


def flags_as_overrides(command: str, arguments: Sequence[str]) -> list[str]:
    """The overrides of ``oml COMMAND ARGUMENTS`` (what argparse left of its command line), where an
    argparse-style flag that names a key of the pipeline's schema becomes that key's override: ``--max-epochs 3``
    and ``--max_epochs=3`` become ``max_epochs=3`` (``-`` read as ``_``; ``--optimizer.args.lr 0.1`` sets a
    nested key). Every other argument is kept as it is.

    Raises:
        ConfigError: a flag that names no key of the schema (``--max-epoch``: with the close key, and how
            overrides are written), or a flag without a value (``--max-epochs`` last).
    """
    if not any(argument.startswith("--") for argument in arguments):
        return list(arguments)
    from oml_core.config.schemas import schema_of

    keys = sorted(f.name for f in fields(schema_of(PIPELINE_CONFIGS[command])))
    overrides: list[str] = []
    rest = iter(arguments)
    for argument in rest:
        if not argument.startswith("--"):
            overrides.append(argument)
            continue
        name, has_value, value = argument[2:].partition("=")
        key = name.replace("-", "_")
        if key.partition(".")[0] not in keys:
            close = difflib.get_close_matches(key, keys, n=1)
            hint = f"; did you mean {close[0]}=VALUE?" if close else ""
            raise ConfigError(
                f"unknown option {argument!r}{hint} (the config's keys are set with overrides KEY=VALUE, "
                f"e.g. {PIPELINE_EXAMPLES[command]['value']}; see oml {command} --help)"
            )
        if not has_value:
            value = next(rest, "--")
            if value.startswith("--"):
                raise ConfigError(f"{argument} needs a value: write {key}=VALUE")
        overrides.append(f"{key}={value}")
    return overrides


def config_yaml(cfg: Any, pipeline: str) -> str:
    """The composed config ``cfg`` of ``pipeline`` as yaml, its interpolations resolved, without the primary
    config's ``hydra:`` section (hydra's settings, which the pipelines do not read), each key of the pipeline's
    schema preceded by its doc as ``#`` comments (:func:`~oml_core.config.reference.commented_yaml`).

    Raises:
        ConfigError: an interpolation does not resolve (one line: the key and omegaconf's reason).
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from oml_core.config.reference import commented_yaml

    try:
        masked = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
        values = OmegaConf.to_container(masked, resolve=True, enum_to_str=True)
    except OmegaConfBaseException as e:
        raise unresolvable_config_error(e) from e
    return commented_yaml(cast(dict[str, Any], values), pipeline)


# ---------------------------------------------------------------------------------------------- plugins
def _cmd_plugins(args: argparse.Namespace, _: list[str]) -> int:
    """List the plugins (:func:`~oml_core.registry.plugin_rows.plugins_report`); with ``--check`` each one is loaded
    and its components imported in a process of its own, each step within ``--timeout`` seconds
    (:func:`~oml_core.registry.isolation.check_plugins`), and the verdict ends the output."""
    if args.check:
        timeout = DEFAULT_TIMEOUT if args.timeout is None else args.timeout
        report = check_plugins(
            include_builtins=args.all, allow=allow_list_from_env(), strict=strict_from_env(), timeout=timeout
        )
    elif args.timeout is not None:
        raise ConfigError("--timeout is the time limit of --check: oml plugins --check --timeout SECONDS")
    else:
        report = plugins_report(Registry(), include_builtins=args.all)
    if args.format == "json":
        print(json.dumps(report, indent=2))
    else:
        print(_plugins_table(report))
    if not args.check:
        return 0
    ok, verdict = check_verdict(report)
    # the json report stays pure json on stdout: its verdict goes to stderr
    print(verdict, file=sys.stderr if args.format == "json" else sys.stdout)
    return 0 if ok else 1


def check_verdict(report: list[dict[str, Any]]) -> tuple[bool, str]:
    """Whether every plugin of a checked ``report`` (:func:`~oml_core.registry.isolation.check_plugins`) loads
    with all its components, and the last line of ``oml plugins --check``: ``OK: 7 plugins, 123 components load``
    or ``FAILED: 2 problems in 1 plugin (see above)``, a problem being a plugin that does not load (or is refused)
    or a component that does not import; two distributions' rows of one name are two plugins."""
    problems = [int(bool(row["error"])) + len(row.get("broken", [])) for row in report]
    failed = [count for count in problems if count]
    if failed:
        total = sum(failed)
        return False, (f"FAILED: {_count(total, 'problem')} in {_count(len(failed), 'plugin')} (see above)")
    components = sum(len(names) for row in report for names in row["provides"].values())
    return True, f"OK: {_count(len(report), 'plugin')}, {_count(components, 'component')} load"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _plugins_table(report: list[dict[str, Any]]) -> str:
    if not report:
        return "No oml plugins installed (see `pip install oml-models oml-losses ...`)."
    lines = []
    for row in report:
        version = f" {row['version']}" if row["version"] else ""
        lines.append(f"{row['name']}  [{row['distribution'] or 'in code'}{version}]")
        if row["error"]:
            lines.append(f"    FAILED: {row['error']}")
        every_run = set(row["every_run"])
        for kind, names in row["provides"].items():
            shown = [f"{n} (every run)" if kind == EVERY_RUN_KIND and n in every_run else n for n in names]
            lines.append(f"    {kind:<16} {', '.join(shown)}")
        for problem in row.get("broken", []):
            lines.append(f"    BROKEN: {problem}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------- registry
def _cmd_plugin_new(args: argparse.Namespace, _: list[str]) -> int:
    from oml_core.scaffold import SCAFFOLD_KINDS, new_plugin

    kinds = (
        SCAFFOLD_KINDS
        if args.kinds is None
        else [kind.strip() for kind in args.kinds.split(",") if kind.strip()]
    )
    folder = new_plugin(args.name, args.dir, kinds)
    files = sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file())
    print(f"Plugin {args.name!r} written to {folder}:")
    print("".join(f"  {name}\n" for name in files), end="")
    print(
        f"Next: pip install -e {shlex.quote(f'{folder}[test]')}; pytest {shlex.quote(str(folder))}; oml plugins"
    )
    return 0


def _cmd_registry(args: argparse.Namespace, _: list[str]) -> int:
    registry = Registry()
    if args.name is not None:  # argparse fills KIND first: there is a KIND
        return _show_component(registry, args.kind, args.name, args.format)
    kinds = [args.kind] if args.kind else list(KINDS)
    rows: list[dict[str, Any]] = [
        {
            "kind": e.kind,
            "name": e.name,
            "plugin": e.plugin.name,
            "aliases": list(e.aliases),
            "description": e.description,
            "every_run": e.every_run,
        }
        for kind in kinds
        for e in registry.entries(kind)
    ]
    if args.format == "json":
        print(json.dumps(rows, indent=2))
        return 0
    for kind in kinds:
        entries = [r for r in rows if r["kind"] == kind]
        print(f"{kind} ({KINDS[kind].description}):")
        if not entries:
            print("    (none)")
        for r in sorted(entries, key=lambda r: r["name"]):
            detail = f" - {r['description']}" if args.kind and r["description"] else ""
            every_run = " (every run)" if r["every_run"] else ""
            print(f"    {r['name']:<32} {r['plugin']}{every_run}{detail}")
    return 0


def component_report(registry: Registry, kind: str, name: str) -> dict[str, Any]:
    """What ``oml registry KIND NAME`` shows: :meth:`Registry.describe` (kind, name, qualified name, aliases,
    plugin, distribution, version, factory, signature, description, every_run), ``provider``, the factory's
    ``arguments`` (``name``, ``kind``, ``annotation``, ``required``, ``default``: a json value, else its repr;
    empty when the factory does not import) and the ``default_config`` (None when there is none).

    Raises:
        RegistryError: ``name`` is not a component of ``kind`` (with the close matches), or two plugins give it.
    """
    entry = registry.get(kind, name)
    report = registry.describe(kind, name)
    report["provider"] = entry.plugin.provider
    try:
        factory = entry.load()
    except RegistryError:  # described as unavailable in the signature
        report["arguments"] = []
    else:
        report["arguments"] = [_argument(p) for p in _parameters(factory)]
    report["default_config"] = registry.default_config(kind, entry.name)
    return report


def _parameters(factory: Any) -> list[inspect.Parameter]:
    """The parameters of ``factory`` (a class: of its constructor), string annotations evaluated where they
    resolve."""
    try:
        signature = inspect.signature(factory, eval_str=True)
    except Exception:  # unresolvable forward references: as written
        try:
            signature = inspect.signature(factory)
        except (TypeError, ValueError):  # no signature (a builtin)
            return []
    return list(signature.parameters.values())


def _argument(parameter: inspect.Parameter) -> dict[str, Any]:
    empty = inspect.Parameter.empty
    annotation = parameter.annotation
    row: dict[str, Any] = {
        "name": parameter.name,
        "kind": parameter.kind.name.lower(),
        "annotation": None if annotation is empty else inspect.formatannotation(annotation),
        "required": parameter.default is empty
        and parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD),
        "text": str(parameter),
    }
    if parameter.default is not empty:
        row["default"] = _json_value(parameter.default)
    return row


def _json_value(value: Any) -> Any:
    """``value`` where json writes it as it is (None, bool, numbers, strings, lists and dicts of them), else
    its repr."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return repr(value)
    return value


def _show_component(registry: Registry, kind: str, name: str, fmt: str) -> int:
    report = component_report(registry, kind, name)
    if fmt == "json":
        report = {
            **report,
            "arguments": [{k: v for k, v in a.items() if k != "text"} for a in report["arguments"]],
        }
        print(json.dumps(report, indent=2))
        return 0
    print(_component_text(report))
    return 0


def _component_text(report: dict[str, Any]) -> str:
    """The table form of :func:`component_report`."""
    from omegaconf import OmegaConf

    rows = [
        ("kind", report["kind"]),
        ("name", f"{report['name']} (qualified: {report['qualified_name']})"),
        ("aliases", ", ".join(report["aliases"]) or "(none)"),
        (
            "provider",
            f"plugin {report['plugin']}, distribution "
            f"{report['distribution'] or '(none, added in code)'} {report['version'] or ''}".rstrip(),
        ),
        ("description", report["description"] or "(none)"),
        ("factory", report["factory"]),
    ]
    if report["kind"] == EVERY_RUN_KIND:
        every_run = (
            "yes: added to every training run (callbacks_disabled switches it off)"
            if report["every_run"]
            else "no: added where a run's callbacks names it"
        )
        rows.append(("every run", every_run))
    lines = [f"{label + ':':<13}{value}" for label, value in rows]
    lines.append("arguments:")
    if not report["arguments"]:
        lines.append(f"    {report['signature']}" if report["signature"].startswith("<") else "    (none)")
    for argument in report["arguments"]:
        required = "  (required)" if argument["required"] else ""
        lines.append(f"    {argument['text']}{required}")
    config = report["default_config"]
    if config is None:
        lines.append("default config: (no default config)")
    else:
        lines.append(
            f"default config ({report['kind']}/{report['name']}.yaml; on the command line "
            f"{report['kind']}@KEY={report['name']}):"
        )
        lines.extend(f"    {line}" for line in OmegaConf.to_yaml(config).splitlines())
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------- mock dataset
def _cmd_mock_dataset(args: argparse.Namespace, _: list[str]) -> int:
    from oml_core.datasets.mock import generate_mock_dataset

    root = args.dir.expanduser().resolve()
    if root.exists() and not root.is_dir():
        raise ConfigError(f"{str(root)!r} exists and is not a directory; choose a new directory")
    if root.exists() and any(root.iterdir()):
        raise ConfigError(f"{str(root)!r} exists and is not empty; choose a new directory")
    generate_mock_dataset(root, seed=args.seed)
    print(f"Mock dataset written to {root}")
    return 0


# ------------------------------------------------------------------------------------- check dataframe
def _cmd_check_dataframe(args: argparse.Namespace, _: list[str]) -> int:
    import warnings

    from oml_core.datasets.dataframe_format import DataFrameFormatError, check_retrieval_dataframe_format

    root = args.dataset_root if args.dataset_root is not None else args.csv.parent
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            check_retrieval_dataframe_format(
                args.csv, dataset_root=root, sep=args.sep, verbose=True, encoding=args.encoding
            )
        except (DataFrameFormatError, FileNotFoundError) as e:
            print(f"oml check-dataframe: error: {e}", file=sys.stderr)
            return 1
    for warning in caught:
        print(f"oml check-dataframe: warning: {warning.message}", file=sys.stderr)
    return 0


# ----------------------------------------------------------------------------------------- gallery index
def _cmd_index_build(args: argparse.Namespace, overrides: list[str]) -> int:
    """Build the index of the config composed with ``overrides`` (composed first, so that a bad override fails
    before anything is read); with ``--show-config`` print that config instead and build nothing."""
    registry = Registry()
    cfg = compose_config(args.config_name, overrides, args.config_path, registry)
    if args.show_config:
        print(config_yaml(cfg, INDEX_BUILD_CONFIG), end="")
        return 0
    from oml_core.index.build import build_gallery_index

    result = build_gallery_index(cfg, registry=registry)
    index = result.index
    backend = index.config["knn_backend"]["name"]
    print(
        f"Gallery index:    {len(index)} items of {result.source} (knn backend {backend!r}, {index.distance})"
    )
    if index.calibration is not None:
        print(f"Calibration:      {index.calibration.summary()}")
    else:
        print(f"Calibration:      none ({result.not_calibrated}): oml search answers with distances only")
    print(f"Index folder:     {result.index_dir}")
    if result.embeddings_out is not None:
        print(f"Embeddings file:  {result.embeddings_out}")
    print(f"Search it:        oml search {shlex.quote(str(result.index_dir))} QUERY...")
    return 0


def _cmd_search(args: argparse.Namespace, _: list[str]) -> int:
    from oml_core.index import GalleryIndex
    from oml_core.index.answers import search_answer, search_table
    from oml_core.index.queries import collect_queries

    device = device_of_arguments(args, "search")
    index = GalleryIndex.load(args.index, registry=Registry(), device=device)
    queries = collect_queries(index.data, args.queries, args.dataset_root, args.text)
    hits = index.search(queries.dataset, top_k=args.top_k)
    answer = search_answer(
        args.index,
        index.calibration.threshold if index.calibration else None,
        queries.names,
        hits,
        calibration_stale=index.calibration_stale,
    )
    print(json.dumps(answer, indent=2) if args.format == "json" else search_table(answer))
    return 0


def _cmd_index_add(args: argparse.Namespace, _: list[str]) -> int:
    from oml_core.index import GalleryIndex, GalleryIndexError
    from oml_core.index.queries import collect_queries

    device = device_of_arguments(args, "index add")
    index = GalleryIndex.load(args.index, registry=Registry(), device=device)
    # the items are named by their absolute paths, as a build names them, so that the index is searched and
    # served from any working folder (a relative path would resolve against the reader's); a blank source stays
    # blank, for collect_queries to refuse (resolved, it would be the working folder)
    sources = [Path(source).expanduser().resolve() if source.strip() else source for source in args.sources]
    root = None if args.dataset_root is None else Path(args.dataset_root).expanduser().resolve()
    items = collect_queries(index.data, sources, root)
    for option, values in (("--ids", args.ids), ("--labels", args.labels)):
        if values is not None and len(values) != len(items.names):
            raise GalleryIndexError(
                f"{option} gives {len(values)} values to the {len(items.names)} items of SOURCE"
            )
    done = index.upsert(items.dataset, ids=args.ids, labels=args.labels)
    generation = index.commit(timeout=args.lock_timeout)
    print(f"added {done.added}, updated {done.updated}, generation {generation}")
    return 0


def _cmd_index_remove(args: argparse.Namespace, _: list[str]) -> int:
    from oml_core.index import GalleryIndex, GalleryIndexError

    if len(set(args.ids)) != len(args.ids):
        twice = next(i for i in args.ids if args.ids.count(i) > 1)
        raise GalleryIndexError(f"the id {twice} is given twice")
    index = GalleryIndex.load(args.index, registry=Registry())
    removed = index.remove(args.ids)
    generation = index.commit(timeout=args.lock_timeout)
    print(f"removed {removed}, generation {generation}")
    return 0


def _cmd_index_calibrate(args: argparse.Namespace, _: list[str]) -> int:
    from oml_core.index import CalibrationError, GalleryIndex, GalleryIndexError

    device = device_of_arguments(args, "index calibrate")
    index = GalleryIndex.load(args.index, registry=Registry(), device=device)
    try:
        calibration = index.recalibrate()
    except CalibrationError as e:
        raise GalleryIndexError(f"calibration: {e}") from e
    generation = index.commit(timeout=args.lock_timeout)
    print(f"calibrated: {calibration.summary()}; generation {generation}")
    return 0


# ----------------------------------------------------------------------------------------------- export
def _cmd_export(args: argparse.Namespace, _: list[str]) -> int:
    from oml_core.export import export_onnx

    result = export_onnx(args.source, args.output, config=args.config, registry=Registry())
    data = result.manifest.data
    inputs = "; ".join(
        f"{item.name} {item.dtype} [{', '.join(str(axis) for axis in item.shape)}]"
        for item in result.manifest.inputs
    )
    print(
        f"Exported:         {data['extractor']['name']} of the {data['source']['kind']} {data['source']['name']}"
    )
    print(f"ONNX model:       {result.manifest.model_path} (inputs: {inputs}; opset {data['opset']})")
    print(
        f"Parity:           relative L2 {result.parity.max_relative_l2:.3g} to PyTorch on "
        f"{len(result.parity.probes)} probes (tolerance {result.parity.tolerance:g})"
    )
    print(f"Manifest:         {result.manifest.folder / 'export.json'}")
    overrides = result.manifest.validate_overrides(str(result.manifest.folder))
    print(f"Run it:           oml validate {shlex.join(overrides)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

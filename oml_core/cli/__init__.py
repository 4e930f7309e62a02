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

The command line is this package: what each command shows is computed in :mod:`oml_core.reports` (each command's
answer as data, with its text and JSON renderings, shared with the service and Python); here each command's module
(:mod:`~oml_core.cli.pipelines`, :mod:`~oml_core.cli.plugins`, :mod:`~oml_core.cli.registry`,
:mod:`~oml_core.cli.datasets`, :mod:`~oml_core.cli.index`, :mod:`~oml_core.cli.search`, :mod:`~oml_core.cli.export`,
:mod:`~oml_core.cli.version`) parses its arguments (``add_parser``) and prints its answer (``run``), the top parser
assembles them (:mod:`~oml_core.cli.commands`), a plugin's command is run by :mod:`~oml_core.cli.plugin_commands`,
errors are reported by :mod:`~oml_core.cli.errors`, and every command but ``--version`` loads plugins under the
vetting of :mod:`~oml_core.cli.guard`. A pipeline's command runs the pipeline and prints the
report of its result (:mod:`oml_core.reports.pipelines`: the metrics, where the run wrote) in the run's main
process; the pipelines themselves print no report.

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
Every command imports only the plugins that passed a check in a process of their own (each plugin's verdict is
kept in the user cache folder until the plugin changes; the first command after a change checks it, see
:mod:`oml_core.registry.vetting`): a plugin that exits, hangs for more than ``OML_PLUGIN_TIMEOUT`` seconds (default
60) or fails at import or in a hook is skipped with one warning naming it and its distribution, and the command goes
on (``OML_STRICT_PLUGINS=1``: that line is the command's error); one that hangs in the command itself ends it with
that line (status 1), and the next commands skip it. ``oml plugins --check`` loads each plugin and imports its
components in a process of its own (a plugin that hangs
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
with status 1, as Python's documentation recommends (see :func:`~oml_core.cli.errors.stdout_closed`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from oml_core.cli import version
from oml_core.cli.commands import build_parser
from oml_core.cli.errors import EXIT_USAGE, flushed, reporting_errors, stdout_closed
from oml_core.cli.guard import vetted
from oml_core.cli.parser import command_name
from oml_core.cli.plugin_commands import run_plugin_command
from oml_core.lightning.quiet import silence_upstream_warnings


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``oml`` console script; returns the exit status (see the module's docstring)."""
    silence_upstream_warnings()
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    given = command_name(argv)
    if given is not None and given not in parser.commands:
        return run_plugin_command(given, argv, parser.commands)
    try:
        args, rest = parser.parse_known_args(argv)
    except (
        SystemExit
    ) as e:  # --help (0) or a bad command line (2, reported on one line by CommandParser.error)
        return flushed(e.code if isinstance(e.code, int) else EXIT_USAGE)
    except BrokenPipeError:  # --help into a closed pipe
        return stdout_closed()
    if args.version:
        args.handler, args.command = version.run, None
    elif args.command is None:
        parser.print_help()
        return EXIT_USAGE
    elif rest and not getattr(args, "takes_overrides", False):
        print(f"oml {args.command}: error: unrecognized arguments: {' '.join(rest)}", file=sys.stderr)
        return EXIT_USAGE
    if args.command is None:  # --version: the distributions' metadata, no plugin
        return reporting_errors("oml", lambda: args.handler(args, rest), args, argv)
    command = f"oml {args.command}"
    return reporting_errors(command, vetted(command, lambda: args.handler(args, rest)), args, argv)


__all__ = ["main"]

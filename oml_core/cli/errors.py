"""How ``oml`` reports an error: on one line of stderr, ``oml COMMAND: <message>``, never as a traceback (unless
asked: ``--traceback``, ``OML_TRACEBACK=1``), with an exit status that tells a user error (2) from a run stopped on
purpose (its own status), a Ctrl-C (130) and a bug of oml or a plugin (1). See :mod:`oml_core.cli` for the rules;
:func:`reporting_errors` applies them to a command's run.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

from oml_core.registry import RegistryError
from oml_core.registry.registry import failed_component
from oml_core.utils.text import one_line, printable

if TYPE_CHECKING:
    from oml_core.lightning.stops import TrainingStopped

EXIT_USAGE = 2
#: The status of a bug (an exception that is no user error), and of a closed stdout (Python's own for EPIPE).
EXIT_INTERNAL = 1
#: The status of a Ctrl-C: ``128 + SIGINT``, the shell's convention.
EXIT_INTERRUPTED = 130
#: Set to 1 (or true, yes, on), the CLI shows the traceback of every error, as ``--traceback`` does.
TRACEBACK_ENV = "OML_TRACEBACK"
#: ``OSError`` types that mean a user's path is wrong (the message names the path), and the error numbers of
#: other ``OSError`` s that the user can fix: a full disk or quota, a file-size limit (``ulimit -f``), a read-only
#: file system, a too long name.
USER_OS_ERRORS = (FileNotFoundError, FileExistsError, PermissionError, NotADirectoryError, IsADirectoryError)
USER_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.ENAMETOOLONG})
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


def reporting_errors(
    command: str, run: Callable[[], int], args: argparse.Namespace, argv: Sequence[str]
) -> int:
    """``run()``'s exit status, its errors reported on one line of stderr after ``command`` (``oml train``), see
    :func:`error_report`, their control characters escaped (:func:`~oml_core.utils.text.printable`: a path
    or a value read from a file may hold them); re-raised when ``args`` ask for the traceback
    (:func:`wants_traceback`)."""
    try:
        status = run()
        sys.stdout.flush()  # a closed stdout shows here, not at exit
        return status
    except BrokenPipeError:
        return stdout_closed()
    except KeyboardInterrupt:
        if wants_traceback(args):
            raise
        print(f"{command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:
        if wants_traceback(args):
            raise
        message, status = error_report(e, argv)
        print(f"{command}: {printable(message)}", file=sys.stderr)
        return status


def flushed(status: int) -> int:
    """``status``, after flushing stdout (the help argparse printed); a closed stdout ends quietly."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        return stdout_closed()
    return status


def unknown_command(given: str, commands: Sequence[str], plugin_commands: Sequence[str] = ()) -> str:
    """The message for the command ``given`` that is none of oml's ``commands`` nor of the ``plugin_commands``:
    ``unknown command 'trian'; did you mean 'train'? (commands: ...; plugin commands: ...)``."""
    close = difflib.get_close_matches(given, [*commands, *plugin_commands], n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    listed = f"; plugin commands: {', '.join(plugin_commands)}" if plugin_commands else ""
    return f"unknown command {given!r}{hint} (commands: {', '.join(commands)}{listed})"


def wants_traceback(args: argparse.Namespace) -> bool:
    """Whether errors are to be re-raised with their traceback: ``--traceback`` or ``OML_TRACEBACK=1``."""
    from_env = os.environ.get(TRACEBACK_ENV, "").strip().lower() in {"1", "true", "yes", "on"}
    return from_env or getattr(args, "traceback", False)


def error_report(error: Exception, argv: Sequence[str]) -> tuple[str, int]:
    """The one line (after ``oml COMMAND: ``) and the exit status that the CLI gives ``error``, raised by the
    command ``oml ARGV``.

    ``error: <message>`` and :data:`EXIT_USAGE` for a user error (see :func:`is_user_error`); for a run stopped
    on purpose, its message, the command that resumes it (:func:`resume_command`, with its ``resume_overrides``)
    and its own ``exit_code``;
    else ``internal error: <Type>: <message> (run with OML_TRACEBACK=1 for the traceback)`` and
    :data:`EXIT_INTERNAL`, naming the component and its plugin when a component's factory raised ``error``
    (:func:`~oml_core.registry.registry.failed_component`).
    """
    # STOPPED_TYPE names TrainingStopped, looked up without importing Lightning
    stopped = cast("type[TrainingStopped] | None", _loaded_type(*STOPPED_TYPE))
    if stopped is not None and isinstance(error, stopped):
        if error.resumable and error.checkpoint is not None:
            command = resume_command(argv, error.checkpoint, error.resume_overrides)
            return one_line(f"{error}; to go on: {command}"), error.exit_code
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


def resume_command(
    argv: Sequence[str], checkpoint: str | os.PathLike[str], overrides: Sequence[str] = ()
) -> str:
    """``oml ARGV OVERRIDES resume=CHECKPOINT``, shell-quoted, where ARGV loses the overrides it had of ``resume``
    and of the keys of ``OVERRIDES`` (``key=value`` each)."""
    replaced = {"resume", *(override.partition("=")[0] for override in overrides)}
    kept = [arg for arg in argv if arg.lstrip("+").partition("=")[0] not in replaced]
    return shlex.join(["oml", *kept, *overrides, f"resume={os.fspath(checkpoint)}"])


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


def stdout_closed() -> int:
    """What Python's documentation recommends when the reader of stdout has gone (``BrokenPipeError``, see
    "Note on SIGPIPE" in the docs of :mod:`signal`): point stdout at devnull, so that the flush at exit does not
    fail again, and end with status 1, Python's own for EPIPE, without a message."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return EXIT_INTERNAL


__all__ = [
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "TRACEBACK_ENV",
    "error_report",
    "flushed",
    "is_user_error",
    "reporting_errors",
    "resume_command",
    "stdout_closed",
    "unknown_command",
    "wants_traceback",
]

"""The engine of a run: its devices and processes (one, or DDP over devices and nodes), the ``pl.Trainer``
arguments the config keys set, and the run's folder (made once, found by every process of the run)."""

from __future__ import annotations

import contextlib
import datetime as dt
import difflib
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oml_core.registry import ConfigError
from oml_core.registry.specs import parameter_names

if TYPE_CHECKING:
    import torch

#: The environment variable through which the DDP processes of a run find the run directory.
RUN_DIR_ENV = "OML_DDP_RUN_DIR"
#: Sub-folder of a run directory that holds the worst-query figures.
FIGURES_FOLDER = "figures"
#: Sub-folder of a training run directory that holds the checkpoints.
CHECKPOINTS_FOLDER = "checkpoints"
#: The accelerators that mean the CUDA GPUs (Lightning's names).
CUDA_ACCELERATORS = ("gpu", "cuda")
#: The accelerators of :func:`one_device` (a command that runs its model without Lightning).
ONE_DEVICE_ACCELERATORS = ("cpu", *CUDA_ACCELERATORS)


def path_inside(
    root: str | os.PathLike[str],
    relative: str | os.PathLike[str],
    key: str,
    root_name: str,
    allow_root: bool = False,
) -> Path:
    """``root / relative`` with symbolic links resolved, where a config names a folder of its own inside a root
    (``logs_folder`` inside ``logs_root``, a logger's relative ``save_dir`` inside the run directory). Nothing is
    created; ``root`` itself may be anywhere (``~`` is expanded), as the user chooses.

    Args:
        root: The root folder (it need not exist yet).
        relative: The config's value.
        key: The config key, for the message (``logs_folder``).
        root_name: What ``root`` is, for the message (``logs_root``, ``the run dir``).
        allow_root: Whether ``relative`` may name ``root`` itself (``.``).

    Raises:
        ConfigError: in one line naming ``key``: ``relative`` is absolute, has a ``..`` part, or leads (through a
            symbolic link) outside ``root``, or to ``root`` itself unless ``allow_root``.
    """
    root = Path(root).expanduser().resolve()
    given = Path(relative)
    where = f"{root_name} ({str(root)!r})"
    if given.is_absolute():
        raise ConfigError(f"{key}: {str(relative)!r} is an absolute path; it names a folder inside {where}")
    if ".." in given.parts:
        raise ConfigError(f"{key}: {str(relative)!r} goes up with '..'; it names a folder inside {where}")
    path = (root / given).resolve()
    if not path.is_relative_to(root):
        raise ConfigError(
            f"{key}: {str(relative)!r} leads to {str(path)!r} through a symbolic link, outside {where}"
        )
    if path == root and not allow_root:
        raise ConfigError(f"{key}: {str(relative)!r} is {where} itself; it names a folder inside it")
    return path


def run_dir_path(
    logs_root: str | os.PathLike[str], postfix: str, folder: str | None = None, stamp: str | None = None
) -> Path:
    """``<logs_root>/<folder>``, by default ``<logs_root>/<stamp>_<postfix>`` (``<stamp>`` for an empty
    postfix; ``stamp``: now, ``YYYY-mm-dd_HH-MM-SS``), checked to lie inside ``logs_root`` (:func:`path_inside`).

    Raises:
        ConfigError: ``logs_folder`` (or ``postfix``) leads outside ``logs_root`` or is ``logs_root`` itself.
    """
    if folder:
        return path_inside(logs_root, folder, "logs_folder", "logs_root")
    stamp = stamp or dt.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    return path_inside(logs_root, "_".join(filter(None, (stamp, postfix))), "postfix", "logs_root")


def make_run_dir(logs_root: str | os.PathLike[str], postfix: str, folder: str | None = None) -> Path:
    """A new directory ``<logs_root>/<folder>``, by default ``<logs_root>/<YYYY-mm-dd_HH-MM-SS>_<postfix>``
    (``<YYYY-mm-dd_HH-MM-SS>`` for an empty postfix; ``_1``, ``_2`` ... appended if taken), inside ``logs_root``
    (:func:`run_dir_path`).

    Runs never write into the directory of an earlier run, so nothing already written is overwritten.

    Raises:
        ConfigError: ``logs_folder`` (or ``postfix``) leads outside ``logs_root``; nothing is created.
    """
    base = run_dir_path(logs_root, postfix, folder)
    candidate, n = base, 0
    while True:
        try:
            candidate.mkdir(parents=True, exist_ok=False)
            return candidate
        except FileExistsError:
            n += 1
            candidate = base.with_name(f"{base.name}_{n}")


def external_launcher() -> tuple[str, int, int] | None:
    """``(launcher, global rank, world size)`` when this process is one of several that torchrun or SLURM's
    ``srun`` started for the run (Lightning then starts no process itself; as Lightning detects them:
    ``TorchElasticEnvironment``, ``SLURMEnvironment``); ``None`` otherwise."""
    from lightning_fabric.plugins.environments import SLURMEnvironment, TorchElasticEnvironment

    if TorchElasticEnvironment.detect():
        found = ("torchrun", int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    elif SLURMEnvironment.detect():
        found = ("SLURM", int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"]))
    else:
        return None
    return found if found[2] > 1 else None


def named_run_dir(logs_root: str | os.PathLike[str], folder: str | None) -> Path | None:
    """``<logs_root>/<folder>``, the run directory a config names (``None`` without ``folder``).

    Raises:
        ConfigError: ``folder`` leads outside ``logs_root`` (:func:`path_inside`).
    """
    return path_inside(logs_root, folder, "logs_folder", "logs_root") if folder else None


def shared_run_dir(make: Callable[[], Path], named: Path | None = None, key: str = "logs_folder") -> Path:
    """The run directory, one for all the processes of a run.

    - One process: ``make()``.
    - The DDP processes Lightning starts for a run (they re-run the program and must not make their own): the
      directory the launching process made, passed on in the environment variable :data:`RUN_DIR_ENV` (set by
      :func:`run_dir_for_ddp_processes`).
    - The processes torchrun or SLURM started (:func:`external_launcher`; they share nothing before the process
      group exists): ``named``, the directory the config names (``key``: ``logs_root/logs_folder``, or
      prediction's ``save_dir``). Rank 0 makes it; a run directory (``key == "logs_folder"``) must be new or
      empty, as runs never write into an earlier run's directory.

    Raises:
        ConfigError: launched by torchrun or SLURM without ``named``, or into a run directory that has files.
    """
    inherited = os.environ.get(RUN_DIR_ENV)
    if inherited:
        return Path(inherited)
    launched = external_launcher()
    if launched is None:
        return make()
    launcher, rank, world_size = launched
    if named is None:
        raise ConfigError(
            f"{launcher} started {world_size} processes: set {key} so that they all write into one directory"
        )
    if rank == 0:
        if key == "logs_folder" and named.is_dir() and any(named.iterdir()):
            raise ConfigError(
                f"{key}: {str(named)!r} holds an earlier run and is never written into: choose another {key}"
            )
        named.mkdir(parents=True, exist_ok=True)
    return named


def is_ddp_child_process() -> bool:
    """True in the DDP processes of a run but the first: those Lightning starts for it (see
    :func:`run_dir_for_ddp_processes`) and those of rank > 0 that torchrun or SLURM started
    (:func:`external_launcher`). What the first process checks (images, paths) they need not check again."""
    launched = external_launcher()
    return RUN_DIR_ENV in os.environ or (launched is not None and launched[1] > 0)


@contextlib.contextmanager
def run_dir_for_ddp_processes(run_dir: Path) -> Iterator[None]:
    """Within the block, the DDP processes started by Lightning find ``run_dir`` (see :func:`shared_run_dir`);
    the variable is removed afterwards, so that a later run makes its own directory."""
    os.environ[RUN_DIR_ENV] = str(run_dir)
    try:
        yield
    finally:
        os.environ.pop(RUN_DIR_ENV, None)


def is_ddp_devices(devices: Any) -> bool:
    """True when ``devices`` asks for more than one process: an int > 1 or a list of more than one device."""
    if isinstance(devices, list | tuple):
        return len(devices) > 1
    return isinstance(devices, int) and not isinstance(devices, bool) and devices > 1


def _is_index(value: Any) -> bool:
    """True for a device index: an int >= 0 (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def resolve_devices(accelerator: str | None, devices: Any) -> tuple[str, Any]:
    """The accelerator and devices of a config's keys ``accelerator`` and ``devices``, as every command reads them.

    ``accelerator`` null: ``gpu`` when CUDA is available, else ``cpu``; ``devices`` null: every GPU (``gpu``)
    or 1. On the CPU a list of devices means that many (the list's length).

    Returns:
        ``(accelerator, devices)``: a name, and a positive int or a non-empty list of device indices.

    Raises:
        ConfigError: ``devices`` is neither null, a positive int nor a non-empty list of ints >= 0.
    """
    import torch

    accelerator = accelerator or ("gpu" if torch.cuda.is_available() else "cpu")
    if devices is None:
        devices = torch.cuda.device_count() if accelerator == "gpu" and torch.cuda.is_available() else 1
    valid_int = _is_index(devices) and devices > 0
    valid_list = isinstance(devices, list | tuple) and devices and all(_is_index(i) for i in devices)
    if not (valid_int or valid_list):
        raise ConfigError(
            f"devices must be null, a positive number of devices or a list of device ids, got {devices!r}"
        )
    if isinstance(devices, list | tuple) and accelerator == "cpu":
        devices = len(devices)
    return accelerator, devices


def parse_engine_params(
    accelerator: str | None,
    devices: Any,
    find_unused_parameters: bool = False,
    num_nodes: int = 1,
    ddp_strategy: Callable[..., Any] | None = None,
) -> dict[str, Any]:
    """The ``pl.Trainer`` arguments ``accelerator, devices, num_nodes, strategy, use_distributed_sampler`` of a
    config's keys ``accelerator``, ``devices``, ``num_nodes`` and ``find_unused_parameters``.

    ``accelerator`` and ``devices`` are read by :func:`resolve_devices` (null: the GPUs when CUDA is available,
    else the CPU). ``num_nodes`` machines run ``devices`` processes each. More than one process in all (see
    :func:`is_ddp_engine`) runs DDP: :class:`~oml_core.ddp.strategy.DDPStrategyClosedAtExit` (Lightning's
    ``DDPStrategy`` whose process group is destroyed at exit) with ``find_unused_parameters``, or
    ``ddp_strategy(find_unused_parameters=...)`` when given (OML's parser passes Lightning's ``DDPStrategy``); one
    runs the plain ``"auto"`` strategy.
    ``use_distributed_sampler`` is always ``False``: the DDP modules patch their loaders themselves.

    Raises:
        ConfigError: ``devices`` is neither null, a positive int nor a non-empty list of ints >= 0;
            ``num_nodes`` is not a positive int.
    """
    from oml_core.ddp.strategy import DDPStrategyClosedAtExit

    accelerator, devices = resolve_devices(accelerator, devices)
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes < 1:
        raise ConfigError(f"num_nodes must be a positive number of machines, got {num_nodes!r}")
    engine: dict[str, Any] = {
        "accelerator": accelerator,
        "devices": devices,
        "num_nodes": num_nodes,
        "strategy": "auto",
        "use_distributed_sampler": False,
    }
    if is_ddp_engine(engine):
        strategy = ddp_strategy if ddp_strategy is not None else DDPStrategyClosedAtExit
        engine["strategy"] = strategy(find_unused_parameters=bool(find_unused_parameters))
    return engine


def is_ddp_engine(engine: Mapping[str, Any]) -> bool:
    """True when the engine (:func:`parse_engine_params`) runs more than one process: more than one device
    (:func:`is_ddp_devices`) or more than one node."""
    return is_ddp_devices(engine["devices"]) or engine.get("num_nodes", 1) > 1


def check_one_device(devices: Any, engine: Mapping[str, Any], pipeline: str) -> None:
    """Raise a ``ConfigError`` when the engine (:func:`parse_engine_params` of the config key ``devices``, whose
    value ``devices`` is, and of ``num_nodes``) has more than one process: ``pipeline`` runs on one device (its
    metrics and outputs are gathered in one process)."""
    if is_ddp_devices(engine["devices"]):
        raise ConfigError(
            f"{pipeline}: devices={devices!r}, but this pipeline runs on one device: set devices to 1 "
            f"or to a list of one device index, e.g. [0]"
        )
    if engine.get("num_nodes", 1) > 1:
        raise ConfigError(
            f"{pipeline}: num_nodes={engine['num_nodes']!r}, but this pipeline runs on one device: set "
            f"num_nodes to 1"
        )


def check_cuda_devices(accelerator: str, devices: Any) -> None:
    """Raise a ``ConfigError`` unless this machine has the CUDA GPUs that ``accelerator`` ``gpu`` (or ``cuda``)
    and ``devices`` (:func:`resolve_devices`'s) ask for: one at least, ``devices`` of them (a number), each
    index of a list among them. Another accelerator asks for none.

    Raises:
        ConfigError: ``accelerator: 'gpu', but this machine has no CUDA GPU (use cpu)``, or ``devices: <value>,
            but this machine has <n> CUDA GPU(s)``.
    """
    import torch

    if accelerator not in CUDA_ACCELERATORS:
        return
    available = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if available == 0:
        raise ConfigError(f"accelerator: {accelerator!r}, but this machine has no CUDA GPU (use cpu)")
    indices = list(devices) if isinstance(devices, list | tuple) else []
    wanted = len(indices) if indices else devices
    beyond = any(_is_index(i) and i >= available for i in indices)
    if (isinstance(wanted, int) and wanted > available) or beyond:
        raise ConfigError(f"devices: {devices!r}, but this machine has {available} CUDA GPU(s)")


def one_device(accelerator: str | None, devices: Any, pipeline: str) -> torch.device:
    """The one torch device on which ``pipeline`` (a command that runs its model itself, without Lightning:
    ``oml index build``, ``oml search``) runs, of its keys ``accelerator`` and ``devices``. They mean what they
    mean to the pipelines (:func:`resolve_devices`): ``accelerator`` null is ``gpu`` when CUDA is available, else
    ``cpu`` (``cuda`` is ``gpu``); ``devices`` is 1, a list of one device index ``[i]``, or null (every GPU, 1
    on the CPU). ``gpu`` gives ``cuda:i`` (``i`` the index of the list, else 0), ``cpu`` the CPU.

    Raises:
        ConfigError: an accelerator other than :data:`ONE_DEVICE_ACCELERATORS`; ``devices`` not null, a
            positive int or a non-empty list; more than one device (:func:`check_one_device`); ``gpu`` on a
            machine without CUDA, or devices it does not have (:func:`check_cuda_devices`).
    """
    import torch

    resolved_accelerator, resolved = resolve_devices(accelerator, devices)
    if resolved_accelerator not in ONE_DEVICE_ACCELERATORS:
        raise ConfigError(
            f"accelerator: {resolved_accelerator!r}, but {pipeline} runs on one of "
            f"{list(ONE_DEVICE_ACCELERATORS)} (null: gpu when CUDA is available, else cpu)"
        )
    check_one_device(devices, {"devices": resolved}, pipeline)
    check_cuda_devices(resolved_accelerator, resolved)
    if resolved_accelerator == "cpu":
        return torch.device("cpu")
    return torch.device("cuda", resolved[0] if isinstance(resolved, list | tuple) else 0)


def merge_trainer_args(
    defaults: Mapping[str, Any], extra: Mapping[str, Any] | None, set_by_keys: Mapping[str, str]
) -> dict[str, Any]:
    """``pl.Trainer`` arguments: ``defaults`` updated by ``extra`` (a config's ``lightning_trainer_extra_args``).

    Args:
        defaults: The pipeline's arguments.
        extra: Any other ``pl.Trainer`` arguments, which win over ``defaults``.
        set_by_keys: ``{trainer argument: what sets it}`` of the arguments the pipeline sets itself (``"the
            config key 'max_epochs'"``).

    Raises:
        ConfigError: ``extra`` is not a mapping, names an argument ``pl.Trainer`` does not take (with the
            closest one), or one that a config key sets (naming that key).
    """
    import pytorch_lightning as pl

    if extra is None:
        return dict(defaults)
    if not isinstance(extra, Mapping):
        raise ConfigError(f"lightning_trainer_extra_args must be a mapping, got {type(extra).__name__}")
    accepted = parameter_names(pl.Trainer.__init__) - {"self"}
    for key in extra:
        if key in set_by_keys:
            raise ConfigError(
                f"lightning_trainer_extra_args.{key}: the pipeline sets this Trainer argument from "
                f"{set_by_keys[key]}"
            )
        if key not in accepted:
            close = difflib.get_close_matches(str(key), sorted(accepted), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"lightning_trainer_extra_args: pl.Trainer has no argument {key!r}{hint}")
    return {**defaults, **extra}


__all__ = [
    "CHECKPOINTS_FOLDER",
    "CUDA_ACCELERATORS",
    "FIGURES_FOLDER",
    "ONE_DEVICE_ACCELERATORS",
    "RUN_DIR_ENV",
    "check_cuda_devices",
    "check_one_device",
    "external_launcher",
    "is_ddp_child_process",
    "is_ddp_devices",
    "is_ddp_engine",
    "make_run_dir",
    "merge_trainer_args",
    "named_run_dir",
    "one_device",
    "parse_engine_params",
    "path_inside",
    "run_dir_for_ddp_processes",
    "run_dir_path",
    "shared_run_dir",
]

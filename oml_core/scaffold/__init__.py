"""``oml plugin new``: write a working plugin distribution to start a third-party plugin from.

:func:`new_plugin` fills the templates of ``oml_core/scaffold/templates`` (``string.Template``, ``$name``
placeholders): a ``pyproject.toml`` with the ``oml`` entry point and the package data; the plugin module, its table
of components (``COMPONENTS``) declared as ``OML_COMPONENTS`` (and its default configs as ``OML_CONFIG_DIRS``), as
every plugin does (:mod:`oml_core.utils.lazy`); one component of each kind, its default config, a ``py.typed``
marker, a README and tests that pass on a fresh :class:`~oml_core.registry.Registry`.
"""

from __future__ import annotations

import keyword
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template

from oml_core import __version__

#: The kinds :func:`new_plugin` writes a component of, in the order of the plugin module.
SCAFFOLD_KINDS = ("extractor", "loss", "retrieval_metric", "dataset")
#: A distribution name that is also made into the package name (``oml-acme`` -> ``oml_acme``).
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*$")
#: Where each kind's component module goes in the package.
_MODULES = {"extractor": "extractor", "loss": "loss", "retrieval_metric": "metric", "dataset": "dataset"}
#: The imports of the generated tests that each kind's tests need, besides the registry and the plugin.
_TEST_IMPORTS = {
    "extractor": {"from pathlib import Path", "import torch"},
    "loss": {"import pytest", "import torch"},
    "retrieval_metric": {"import pytest", "import torch"},
    "dataset": {
        "from pathlib import Path",
        "from typing import Any",
        "import pytest",
        "import torch",
        "from torch import Tensor",
        "from oml_core import hookimpl",
        "from oml_core.interfaces.models import IExtractor",
        "from oml_core.lightning.pipelines import extractor_validation_pipeline",
        "from oml_core.registry.errors import ConfigError",
        "from oml_core.registry.hookspecs import RegisterCallback",
    },
}
#: The modules of the standard library that the generated tests import (the first block of their imports).
_STDLIB = frozenset({"importlib", "pathlib", "typing"})


def _import_group(line: str) -> int:
    """The block of an import line of the generated tests, as in oml's own code: 0 the standard library, 1 the
    other libraries, 2 ``oml_core`` (followed by the plugin's own import)."""
    module = line.split()[1].split(".")[0]
    return 0 if module in _STDLIB else 2 if module == "oml_core" else 1


def _import_order(line: str) -> tuple[bool, str]:
    """isort's order within a block: ``import x`` lines first, then ``from x import y``, by module."""
    return line.startswith("from "), line.split()[1]


class PluginScaffoldError(ValueError):
    """A plugin cannot be written: a bad name, an unknown kind, or a target folder that is not empty."""


@dataclass(frozen=True)
class ScaffoldNames:
    """The names of a new plugin, made from its distribution name.

    Attributes:
        dist: The distribution (``pip install`` name): ``oml-acme``.
        package: The importable package and the entry point's name: ``oml_acme``.
        short: The prefix of the components' names: ``acme`` (the package without a leading ``oml_``).
        camel: The prefix of the components' classes: ``Acme``.
    """

    dist: str
    package: str
    short: str
    camel: str

    @classmethod
    def of(cls, name: str) -> ScaffoldNames:
        """The names of the plugin called ``name``.

        Raises:
            PluginScaffoldError: ``name`` is not letters and digits in words joined by ``-`` or ``_`` starting with
                a letter, or its package would be a Python keyword.
        """
        if not _NAME.match(name):
            raise PluginScaffoldError(
                f"plugin name {name!r}: use letters and digits, words joined by '-' or '_', starting with a letter "
                "(e.g. oml-acme)"
            )
        package = name.replace("-", "_").lower()
        if keyword.iskeyword(package):
            raise PluginScaffoldError(f"plugin name {name!r}: its package {package!r} is a Python keyword")
        short = package.removeprefix("oml_") or package
        return cls(name.lower(), package, short, "".join(word.capitalize() for word in short.split("_")))


def core_version_bounds(version: str = __version__) -> str:
    """The ``oml-core`` requirement of a new plugin: this release's minor series, ``>=0.1,<0.2`` for ``0.1.x``
    (the hook API may change between 0.x minors)."""
    major, minor = (int(part) for part in version.split(".")[:2])
    return f">={major}.{minor},<{major}.{minor + 1}"


def new_plugin(
    name: str, directory: str | os.PathLike[str] | None = None, kinds: Sequence[str] = SCAFFOLD_KINDS
) -> Path:
    """Write the plugin distribution ``name`` to ``directory`` (default: ``./<name>``) and return its folder.

    The folder holds ``pyproject.toml``, ``README.md``, ``<package>/__init__.py``, ``<package>/plugin.py``, one
    module per kind (``extractor.py``, ``loss.py``, ``metric.py``, ``dataset.py``),
    ``<package>/configs/<kind>/<name>.yaml`` for the extractor, the loss and the dataset, ``<package>/py.typed`` and
    ``tests/test_<package>.py``. The components are named ``<short>_net``, ``<short>_center``, ``<short>_recall``
    and ``<short>_features`` (``short``: see :class:`ScaffoldNames`); the dataset component reads rows of numbers
    (a ``features`` column of a CSV in OML's format) as float tensors, a start for a modality of one's own.

    The files are written to a temporary sibling folder that is renamed into place: an interrupted call leaves no
    half-written plugin, and an existing folder is never written into.

    Raises:
        PluginScaffoldError: a bad ``name``, a kind not in :data:`SCAFFOLD_KINDS` or none, or a ``directory``
            that exists and is not empty.
    """
    names = ScaffoldNames.of(name)
    kinds = _checked_kinds(kinds)
    target = Path(directory if directory is not None else names.dist).expanduser().resolve()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise PluginScaffoldError(f"{target} exists and is not empty: give a new folder")
    files = _files(names, kinds)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        for relative, text in files.items():
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        if target.exists():  # an empty folder, replaced
            target.rmdir()
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def _checked_kinds(kinds: Sequence[str]) -> tuple[str, ...]:
    unknown = [kind for kind in kinds if kind not in SCAFFOLD_KINDS]
    if unknown or not kinds:
        what = f"unknown kind(s) {unknown}" if unknown else "no kind given"
        raise PluginScaffoldError(f"{what}; oml plugin new writes components of: {', '.join(SCAFFOLD_KINDS)}")
    return tuple(kind for kind in SCAFFOLD_KINDS if kind in kinds)


def _template(path: str) -> Template:
    return Template(
        resources.files(__name__).joinpath("templates").joinpath(path).read_text(encoding="utf-8")
    )


def _files(names: ScaffoldNames, kinds: tuple[str, ...]) -> dict[str, str]:
    """``{relative path: text}`` of the plugin's files."""
    values = {
        "dist": names.dist,
        "package": names.package,
        "core_bounds": core_version_bounds(),
        "summary": ", ".join(kind.replace("_", " ") for kind in kinds) + " components",
        "extractor_name": f"{names.short}_net",
        "extractor_class": f"{names.camel}Net",
        "loss_name": f"{names.short}_center",
        "loss_class": f"{names.camel}CenterLoss",
        "metric_name": f"{names.short}_recall",
        "metric_function": f"{names.short}_recall",
        "dataset_name": f"{names.short}_features",
        "dataset_class": f"{names.camel}Features",
        "camel": names.camel,
        # the dataset's tests run oml's validation pipeline, whose default logger is oml-loggers'
        "test_requirements": '"pytest>=7.4"'
        + (f', "oml-loggers{core_version_bounds()}"' if "dataset" in kinds else ""),
    }

    def fill(path: str) -> str:
        return _template(path).substitute(values)

    package = names.package
    values["components"] = "".join(fill(f"{kind}/readme.md.tmpl") for kind in kinds)
    values["usage"] = _usage(kinds, values)
    values["python_usage"] = _python_usage(kinds, values)
    imports = set().union(*(_TEST_IMPORTS[kind] for kind in kinds))
    imports |= {"import importlib.metadata", "import pytest", "from oml_core.registry import Registry"}
    groups = [[i for i in imports if _import_group(i) == group] for group in range(3)]
    values["imports"] = "\n\n".join("\n".join(sorted(group, key=_import_order)) for group in groups)
    values["imports"] += f"\nfrom {package} import plugin"
    files = {
        "pyproject.toml": fill("common/pyproject.toml.tmpl"),
        "README.md": fill("common/README.md.tmpl"),
        f"{package}/__init__.py": fill("common/package_init.py.tmpl"),
        f"{package}/py.typed": "",
    }
    values["rows"] = "".join(fill(f"{kind}/component.py.tmpl") for kind in kinds)
    plugin = fill("common/plugin_header.py.tmpl")
    tests = fill("common/test_header.py.tmpl") + "".join(fill(f"{kind}/test.py.tmpl") for kind in kinds)
    configured = [kind for kind in kinds if kind != "retrieval_metric"]
    if configured:
        plugin += fill("common/plugin_configs.py.tmpl")
        files[f"{package}/configs/__init__.py"] = ""
    for kind in kinds:
        files[f"{package}/{_MODULES[kind]}.py"] = fill(f"{kind}/module.py.tmpl")
    for kind in configured:
        files[f"{package}/configs/{kind}/{values[f'{kind}_name']}.yaml"] = fill(f"{kind}/config.yaml.tmpl")
    files[f"{package}/plugin.py"] = plugin
    files[f"tests/test_{package}.py"] = tests
    return files


def _usage(kinds: tuple[str, ...], values: dict[str, str]) -> str:
    """The README's command lines: train with the components, compute the metric, train on the dataset."""
    overrides = []
    if "extractor" in kinds:
        overrides.append(f"extractor.name={values['extractor_name']}")
    if "loss" in kinds:
        overrides.append(f"criterion.name={values['loss_name']}")
    if "retrieval_metric" in kinds:
        overrides.append(f"+metric_args.{values['metric_name']}_top_k=[1,5]")
    lines = [f"oml train {' '.join(overrides)}"] if overrides else []
    if "extractor" in kinds:
        lines.append(
            f"oml validate extractor.name={values['extractor_name']} "
            "extractor.args.weights=logs/<run>/checkpoints/best.ckpt"
        )
    if "dataset" in kinds:
        lines.append(
            f"oml train dataset.name={values['dataset_name']} dataset_root=<the folder of df.csv> "
            "extractor.name=<an extractor of [batch, dim] rows>"
        )
    return "".join(f"{line}\n" for line in lines)


def _python_usage(kinds: tuple[str, ...], values: dict[str, str]) -> str:
    """The README's Python lines: build each component from the default registry."""
    lines = ["registry = default_registry()"]
    if "extractor" in kinds:
        lines.append(
            f'model = registry.build("extractor", {{"name": "{values["extractor_name"]}", "args": {{}}}})'
        )
    if "loss" in kinds:
        lines.append(f'loss = registry.build("loss", "{values["loss_name"]}")')
    if "retrieval_metric" in kinds:
        lines.append(f'metric = registry.get("retrieval_metric", "{values["metric_name"]}").load()')
    if "dataset" in kinds:
        lines.append(
            f'data = registry.build("dataset", "{values["dataset_name"]}", dataset_root="<folder>", '
            'dataframe_name="df.csv")'
        )
        lines.append(
            "train = data.train_dataset()  # items: {'input_tensors': [dim] floats, 'labels': ..., 'idx': ...}"
        )
    return "".join(f"{line}\n" for line in lines)


__all__ = ["PluginScaffoldError", "SCAFFOLD_KINDS", "ScaffoldNames", "core_version_bounds", "new_plugin"]

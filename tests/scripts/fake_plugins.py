"""Real plugin distributions for tests, without pip: a ``*.dist-info`` folder with ``METADATA`` and
``entry_points.txt`` next to the plugin's module, in a folder that ``importlib.metadata`` finds once it is on
``sys.path`` (``monkeypatch.syspath_prepend``) or on a subprocess's ``PYTHONPATH``."""

from __future__ import annotations

from pathlib import Path

import pytest


def fake_distribution(
    root: Path, distribution: str, entry_point: str, module: str, source: str, version: str = "0.3"
) -> Path:
    """Install under ``root`` the distribution ``distribution`` ``version`` whose ``oml`` entry point
    ``entry_point`` is the module ``module`` with the code ``source``; returns ``root``."""
    (root / f"{module}.py").write_text(source)
    dist_info = root / f"{distribution.replace('-', '_')}-{version}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n")
    (dist_info / "entry_points.txt").write_text(f"[oml]\n{entry_point} = {module}\n")
    return root


def install_lightning_plugin(monkeypatch: pytest.MonkeyPatch, site: Path) -> None:
    """Put the fake distributions of ``site`` on this process's path, beside every installed plugin, loaded
    leniently (``OML_LOAD_PLUGINS``, ``OML_STRICT_PLUGINS`` and ``OML_TRACEBACK`` unset), without the slow-import
    warning: a plugin that imports Lightning may be slow to import on a busy machine."""
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("OML_PLUGIN_SLOW_SECONDS", "0")
    for name in ("OML_LOAD_PLUGINS", "OML_STRICT_PLUGINS", "OML_TRACEBACK"):
        monkeypatch.delenv(name, raising=False)

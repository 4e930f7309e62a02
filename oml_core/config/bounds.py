"""The bounds of a config: its size, alias expansion, nesting depth and list lengths, checked before hydra or
omegaconf reads it (a "billion laughs" yaml of a few KB, an 800,000-item list or a 20,000-deep nesting would
take minutes or end in a ``RecursionError``), and the plausibility bounds of its counts (epochs, batch sizes),
which the schemas' rules carry (:mod:`~oml_core.config.schemas`).

Each refusal is a one-line :class:`~oml_core.registry.ConfigError` naming the file or override, the key and
the limit: ``'bomb.yaml', line 4: a9: 9 YAML aliases expand past the limit of 100,000 values``.

- :func:`check_config_file`: a yaml file, read as a stream of yaml events (never composed): its size, the
  values it holds with its aliases expanded, its nesting depth and the items of each list;
- :func:`check_override_bounds`: a command-line override, before hydra's parser (whose time grows with the
  square of a list's items, and whose recursion a deep nesting exhausts) reads it;
- :func:`check_value_bounds`: a config given as plain containers (a dict in Python, a composed config).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oml_core.registry import ConfigError

#: The largest config file read, in bytes (oml's own configs are about 2 KB).
MAX_CONFIG_FILE_BYTES = 1024 * 1024
#: The most values (keys, items and values, nested ones and those of expanded yaml aliases) of one config.
MAX_CONFIG_VALUES = 100_000
#: The deepest nesting of mappings and lists in a config (oml's deepest spec, a post-processor's pairwise model's
#: extractor's arguments, is 6 levels deep).
MAX_CONFIG_DEPTH = 32
#: The most items of one list of a config.
MAX_LIST_ITEMS = 10_000
#: The longest command-line override, in characters (longer values belong in a config file).
MAX_OVERRIDE_CHARS = 8_192
#: The most items (values separated by commas) of one command-line override.
MAX_OVERRIDE_ITEMS = 1_000
#: The most epochs of a training (``max_epochs``, ``valid_period``, ``freeze_n_epochs``).
MAX_EPOCHS = 100_000
#: The largest batch (``bs_train``, ``bs_val``, ``bs``, ``batch_size_inference``, and a sampler's labels times
#: instances); the largest batches of contrastive training are 32,768.
MAX_BATCH_SIZE = 65_536


def check_config_file(path: Path) -> None:
    """Check the yaml config file ``path`` against the bounds before it is composed: its size
    (:data:`MAX_CONFIG_FILE_BYTES`), then, reading it as yaml events (bounded in number, never composed into
    objects), the values it holds with its aliases expanded (:data:`MAX_CONFIG_VALUES`), its nesting depth
    (:data:`MAX_CONFIG_DEPTH`) and the items of each list (:data:`MAX_LIST_ITEMS`). A file that is not yaml is
    left to the composition, which reports it with the line and column.

    Raises:
        ConfigError: one line naming the file, the line and key where the bound is passed, and the limit.
    """
    size = path.stat().st_size
    if size > MAX_CONFIG_FILE_BYTES:
        raise ConfigError(
            f"{str(path)!r}: {size:,} bytes is past the limit of {MAX_CONFIG_FILE_BYTES:,} bytes of a config file"
        )
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser, 30 times PyYAML's speed
    try:
        _scan_events(yaml.parse(path.read_bytes(), Loader=loader), str(path))
    except yaml.MarkedYAMLError as e:
        # libyaml reads tokens ahead: a nesting past its own limit (1,000) is its error, before our bound's turn
        if "maximum nesting depth" in str(e.problem) and e.problem_mark is not None:
            raise ConfigError(
                f"{str(path)!r}, line {e.problem_mark.line + 1}: nested deeper than the limit of {MAX_CONFIG_DEPTH} "
                "levels of a config"
            ) from None
        # any other error: hydra's composition reports it, with the line and column
    except yaml.YAMLError:
        return


def check_config_files(folders: Iterable[Path]) -> None:
    """:func:`check_config_file` of every ``.yaml`` file under each of ``folders`` (a user's config dirs: their
    primary config and its config groups, any of which hydra may read)."""
    for folder in folders:
        for path in sorted(folder.rglob("*.yaml")):
            if path.is_file():
                check_config_file(path)


def check_override_bounds(overrides: Sequence[str]) -> None:
    """Check each command-line override against :data:`MAX_OVERRIDE_CHARS`, :data:`MAX_OVERRIDE_ITEMS` (its
    commas) and :data:`MAX_CONFIG_DEPTH` (its brackets), before hydra's parser reads it.

    Raises:
        ConfigError: ``<override, shortened>: an override of 30,000 items is past the limit of 1,000 items ...``.
    """
    for override in overrides:
        said = _shortened(override)
        if len(override) > MAX_OVERRIDE_CHARS:
            raise ConfigError(
                f"{said}: an override of {len(override):,} characters is past the limit of "
                f"{MAX_OVERRIDE_CHARS:,}; put long values in a config file (--config-path, --config-name)"
            )
        items = override.count(",") + 1
        if items > MAX_OVERRIDE_ITEMS:
            raise ConfigError(
                f"{said}: an override of {items:,} items is past the limit of {MAX_OVERRIDE_ITEMS:,}; put long "
                f"lists in a config file (--config-path, --config-name)"
            )
        depth = _bracket_depth(override)
        if depth > MAX_CONFIG_DEPTH:
            raise ConfigError(
                f"{said}: nested {depth:,} levels deep, past the limit of {MAX_CONFIG_DEPTH} levels of a config"
            )


def check_value_bounds(config: Any, where: str) -> None:
    """Check a config given as plain containers (mappings, lists, tuples) against :data:`MAX_CONFIG_VALUES`,
    :data:`MAX_CONFIG_DEPTH` and :data:`MAX_LIST_ITEMS`, walking it without recursion.

    Raises:
        ConfigError: ``<where>: <key>: a list of 800,000 items is past the limit of 10,000 items``, ...
    """
    values = 0
    stack: list[tuple[str, Any, int]] = [("", config, 0)]
    while stack:
        key, value, depth = stack.pop()
        values += 1
        if values > MAX_CONFIG_VALUES:
            raise ConfigError(f"{where}: more than {MAX_CONFIG_VALUES:,} values, past the limit of a config")
        if not isinstance(value, Mapping | list | tuple):
            continue
        if depth >= MAX_CONFIG_DEPTH:
            raise ConfigError(
                f"{where}: {_shortened(key)}: nested deeper than the limit of {MAX_CONFIG_DEPTH} levels of a config"
            )
        if isinstance(value, Mapping):
            stack.extend((f"{key}.{k}" if key else str(k), v, depth + 1) for k, v in value.items())
            continue
        if len(value) > MAX_LIST_ITEMS:
            raise ConfigError(
                f"{where}: {key}: a list of {len(value):,} items is past the limit of {MAX_LIST_ITEMS:,} items"
            )
        stack.extend((f"{key}[{i}]", v, depth + 1) for i, v in enumerate(value))


# ------------------------------------------------------------------------------------------ yaml events
@dataclass
class _Collection:
    """A mapping or list of a yaml file being read: where it is (its key), what it holds so far."""

    is_list: bool
    key: str
    anchor: str | None
    values_before: int
    nodes: int = 0
    height: int = 1
    current_key: str = ""


def _scan_events(events: Iterable[Any], file: str) -> None:
    """Walk the yaml ``events`` of ``file``, stopping at the first bound passed (see :func:`check_config_file`)."""
    import yaml

    expanded: dict[str, int] = {}  # an anchor -> the values of its node, its own aliases expanded
    heights: dict[str, int] = {}  # an anchor -> the levels of nesting of its node (a scalar: 0)
    open_collections: list[_Collection] = []
    values = aliases = 0
    for event in events:
        if isinstance(event, yaml.CollectionEndEvent):
            done = open_collections.pop()
            if open_collections:
                open_collections[-1].height = max(open_collections[-1].height, done.height + 1)
            if done.anchor is not None:
                expanded[done.anchor] = values - done.values_before
                heights[done.anchor] = done.height
            continue
        if not isinstance(event, yaml.NodeEvent):
            continue
        parent = open_collections[-1] if open_collections else None
        key = _child_key(parent, event)
        levels = len(open_collections)  # of the node of the event, its own nesting included
        if isinstance(event, yaml.AliasEvent):
            aliases += 1
            values += expanded.get(event.anchor, 1)
            levels += heights.get(event.anchor, 0)
            if parent is not None:
                parent.height = max(parent.height, heights.get(event.anchor, 0) + 1)
        else:
            values += 1
            levels += isinstance(event, yaml.CollectionStartEvent)
        where = f"{file!r}, line {event.start_mark.line + 1}: {_shortened(key) or 'the document'}"
        if values > MAX_CONFIG_VALUES:
            what = (
                f"{aliases:,} YAML aliases expand"
                if aliases
                else f"more than {MAX_CONFIG_VALUES:,} values go"
            )
            raise ConfigError(f"{where}: {what} past the limit of {MAX_CONFIG_VALUES:,} values of a config")
        if parent is not None and parent.is_list and parent.nodes > MAX_LIST_ITEMS:
            raise ConfigError(
                f"{where}: a list of more than {MAX_LIST_ITEMS:,} items is past the limit of {MAX_LIST_ITEMS:,} items"
            )
        if levels > MAX_CONFIG_DEPTH:
            raise ConfigError(
                f"{where}: nested deeper than the limit of {MAX_CONFIG_DEPTH} levels of a config"
            )
        if isinstance(event, yaml.CollectionStartEvent):
            is_list = isinstance(event, yaml.SequenceStartEvent)
            open_collections.append(_Collection(is_list, key, event.anchor, values - 1))
        elif event.anchor is not None and isinstance(event, yaml.ScalarEvent):
            expanded[event.anchor] = 1


def _child_key(parent: _Collection | None, event: Any) -> str:
    """The key of the node of ``event`` in ``parent`` (``a.b``, ``a.b[3]``), counting it among ``parent``'s
    nodes; a mapping's key node is named by the mapping's key."""
    import yaml

    if parent is None:
        return ""
    parent.nodes += 1
    if parent.is_list:
        return f"{parent.key}[{parent.nodes - 1}]"
    if parent.nodes % 2 == 1:  # a key of the mapping
        parent.current_key = str(event.value) if isinstance(event, yaml.ScalarEvent) else "?"
        return parent.key
    return f"{parent.key}.{parent.current_key}" if parent.key else parent.current_key


def _bracket_depth(text: str) -> int:
    """The deepest nesting of ``[`` and ``{`` in ``text`` (quotes not told apart: an upper estimate)."""
    depth = deepest = 0
    for char in text:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _shortened(text: str, width: int = 80) -> str:
    """``text`` cut to ``width`` characters, its middle elided (``x[0][0]...[0][0]``)."""
    if len(text) <= width:
        return text
    half = (width - 3) // 2
    return f"{text[:half]}...{text[-half:]}"


__all__ = [
    "MAX_BATCH_SIZE",
    "MAX_CONFIG_DEPTH",
    "MAX_CONFIG_FILE_BYTES",
    "MAX_CONFIG_VALUES",
    "MAX_EPOCHS",
    "MAX_LIST_ITEMS",
    "MAX_OVERRIDE_CHARS",
    "MAX_OVERRIDE_ITEMS",
    "check_config_file",
    "check_config_files",
    "check_override_bounds",
    "check_value_bounds",
]

#!/usr/bin/env python
"""OML 4.0's public module paths and names, checked against ``oml_core``: does each resolve, with OML's signature?

Usage: ``python surface.py OML_SRC [--missing FILE] [--differences FILE] [--expected FILE] [-v]``, where
``OML_SRC`` is a folder holding OML's ``oml/`` package (exported from a clone, e.g.
``git -C CLONE archive HEAD oml | tar -x -C OML_SRC``). OML's code is only read and parsed (``ast``), never imported.

1. Every module of OML's ``oml/`` tree is listed (``oml/configs``, the YAML configs, is skipped, and so is any module
   whose file or folder name starts with ``_`` other than ``__init__.py``). Its public names are its ``__all__``
   (the strings of the list or tuple assigned to it, plus any ``__all__ +=``), else its top-level functions,
   classes and assigned names not starting with ``_``; a package's ``__init__.py`` without ``__all__`` also
   exports what it imports from ``oml`` (``oml/utils/__init__.py`` re-exports ``get_mock_images_dataset``).
2. ``oml_core.<same path>`` is imported and each name looked up with ``getattr``.
3. For each name that resolves and whose definition in OML (followed through OML's own imports) is a function or
   a class (its ``__init__``, found up OML's class hierarchy), OML's parameters are compared with
   ``inspect.signature`` of oml's object. A difference is reported where an OML caller would break: a parameter
   OML takes positionally that oml has at another position, under another name or keyword-only; one oml does not
   take at all; another default (OML's default is compared when it is a literal or a name oml's module of the
   same path resolves, else noted as not compared); a parameter oml requires and OML does not have; ``*args`` or
   ``**kwargs`` that oml lacks. oml may add parameters with defaults after OML's.

``--expected`` names a tab-separated file of ``module<TAB>name<TAB>reason`` lines (``name`` may be ``*`` for a whole
module) for the names that oml deliberately does not give, or gives with another signature: those are counted and
listed apart, with their reason. ``--missing`` and ``--differences`` write the unexplained ones, a line each
(``module<TAB>name`` and ``module<TAB>name<TAB>difference``). The exit status is 0 either way.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OML_PACKAGE = "oml"
PACKAGE = "oml_core"
SKIPPED_FOLDERS = ("configs",)


@dataclass
class OmlModule:
    """One module of OML's tree, as parsed: its dotted path relative to ``oml`` (``""`` for the package itself)."""

    path: str
    is_package: bool
    tree: ast.Module
    public: list[str] = field(default_factory=list)
    has_all: bool = False
    #: top-level functions and classes defined here, by name
    defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef] = field(default_factory=dict)
    #: names imported from OML's own modules: name -> (module path relative to ``oml``, name there)
    imports: dict[str, tuple[str, str]] = field(default_factory=dict)


def iter_module_files(root: Path) -> Iterator[tuple[str, bool, Path]]:
    """``(dotted path relative to oml, is a package, file)`` of every public module of ``root/oml``, sorted."""
    package = root / OML_PACKAGE
    for file in sorted(package.rglob("*.py")):
        parts = file.relative_to(package).with_suffix("").parts
        if parts[0] in SKIPPED_FOLDERS or any(p.startswith("_") and p != "__init__" for p in parts):
            continue
        is_package = parts[-1] == "__init__"
        yield ".".join(parts[:-1] if is_package else parts), is_package, file


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str | None:
    """The module an ``ImportFrom`` in OML's module ``module`` reads, relative to ``oml``; ``None`` outside OML."""
    if node.level:
        base = module.split(".") if module else []
        if not is_package:
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
        return ".".join([*base, *([node.module] if node.module else [])])
    if node.module == OML_PACKAGE:
        return ""
    if node.module and node.module.startswith(OML_PACKAGE + "."):
        return node.module[len(OML_PACKAGE) + 1 :]
    return None


def _all_names(tree: ast.Module) -> list[str] | None:
    """The strings of the module's ``__all__`` (its assignments and ``+=``), ``None`` if it has none."""
    names: list[str] | None = None
    for node in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets, value = [node.target], node.value
        if not any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) or value is None:
            continue
        found = [e.value for e in ast.walk(value) if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        names = [*(names or []), *found] if isinstance(node, ast.AugAssign) else found
    return names


def _assigned(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.Assign):
        return [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def parse_module(path: str, is_package: bool, file: Path) -> OmlModule:
    """Parse one of OML's modules: its public names, definitions and imports from OML."""
    module = OmlModule(path, is_package, ast.parse(file.read_text(encoding="utf-8"), str(file)))
    top_level: list[str] = []
    for node in module.tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            module.defs[node.name] = node
            top_level.append(node.name)
        elif isinstance(node, ast.ImportFrom) and (source := _absolute(path, is_package, node)) is not None:
            for alias in node.names:
                module.imports[alias.asname or alias.name] = (source, alias.name)
        else:
            top_level.extend(_assigned(node))
    names = _all_names(module.tree)
    module.has_all = names is not None
    if names is None:
        names = top_level + (list(module.imports) if is_package else [])
    module.public = list(dict.fromkeys(n for n in names if not n.startswith("_")))
    return module


def parse_tree(root: Path) -> dict[str, OmlModule]:
    """Every public module of OML's tree under ``root``, by dotted path relative to ``oml``."""
    modules = {
        path: parse_module(path, is_package, file) for path, is_package, file in iter_module_files(root)
    }
    if not modules:
        raise SystemExit(f"{root}: no {OML_PACKAGE}/ package with Python modules in it")
    return modules


def find_definition(
    modules: dict[str, OmlModule], module: str, name: str
) -> tuple[str, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef] | None:
    """OML's definition of ``name`` as seen from ``module`` (its module and node), following OML's imports."""
    seen = set()
    while (module, name) not in seen:
        seen.add((module, name))
        parsed = modules.get(module)
        if parsed is None:
            return None
        if name in parsed.defs:
            return module, parsed.defs[name]
        if name not in parsed.imports:
            return None  # an assignment, a submodule or a name from outside OML
        module, name = parsed.imports[name]
    return None


def _init_of(
    modules: dict[str, OmlModule], module: str, node: ast.ClassDef
) -> tuple[str, ast.FunctionDef | ast.AsyncFunctionDef] | None:
    """The ``__init__`` a class of OML gets: its own, else the first found up its bases defined in OML."""
    for item in node.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == "__init__":
            return module, item
    for base in node.bases:
        if isinstance(base, ast.Name) and (found := find_definition(modules, module, base.id)) is not None:
            base_module, base_node = found
            if isinstance(base_node, ast.ClassDef) and (init := _init_of(modules, base_module, base_node)):
                return init
    return None


@dataclass(frozen=True)
class Param:
    """One parameter of OML's signature, from the ``ast``."""

    name: str
    kind: inspect._ParameterKind
    default: ast.expr | None


def oml_params(function: ast.FunctionDef | ast.AsyncFunctionDef, drop_first: bool) -> list[Param]:
    """The parameters of an OML function in ``inspect``'s order and kinds (``self`` dropped for a method)."""
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    params = [
        Param(
            a.arg,
            inspect.Parameter.POSITIONAL_ONLY
            if i < len(args.posonlyargs)
            else inspect.Parameter.POSITIONAL_OR_KEYWORD,
            d,
        )
        for i, (a, d) in enumerate(zip(positional, defaults, strict=True))
    ]
    if args.vararg:
        params.append(Param(args.vararg.arg, inspect.Parameter.VAR_POSITIONAL, None))
    params += [
        Param(a.arg, inspect.Parameter.KEYWORD_ONLY, d)
        for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
    ]
    if args.kwarg:
        params.append(Param(args.kwarg.arg, inspect.Parameter.VAR_KEYWORD, None))
    return (
        params[1:]
        if drop_first and params and params[0].kind <= inspect.Parameter.POSITIONAL_OR_KEYWORD
        else params
    )


_NOT_COMPARED = object()


def oml_default(expr: ast.expr, oml_module: str, modules: dict[str, OmlModule]) -> Any:
    """The value of OML's default ``expr`` as oml has it: a literal, or a name (``a.b.c``) looked up in
    ``oml_core.<oml_module>`` (else in oml's module that OML imports it from); :data:`_NOT_COMPARED` otherwise
    (a call, an operation: nothing of OML is evaluated)."""
    try:
        return ast.literal_eval(expr)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    chain: list[str] = []
    node = expr
    while isinstance(node, ast.Attribute):
        chain.insert(0, node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return _NOT_COMPARED
    head, module = node.id, oml_module
    parsed = modules.get(module)
    if parsed is not None and head in parsed.imports:
        module, head = parsed.imports[head]
    try:
        value = getattr(importlib.import_module(f"{PACKAGE}.{module}" if module else PACKAGE), head)
        for attr in chain:
            value = getattr(value, attr)
    except Exception:  # oml has no such name there: not comparable, reported as such
        return _NOT_COMPARED
    return value


def _same_default(ours: Any, theirs: Any) -> bool:
    """Equal defaults: the same object, or equal values of one type (an int and a float of one value too)."""
    if ours is theirs:
        return True
    numbers = (int, float)
    same_type = type(ours) is type(theirs) or (
        type(ours) in numbers and type(theirs) in numbers  # bool is not in `numbers`: True is not 1 here
    )
    try:
        return same_type and bool(ours == theirs)
    except Exception:  # an array's ambiguous truth value and the like
        return False


def compare_signature(
    theirs: list[Param], ours: inspect.Signature, module: str, modules: dict[str, OmlModule]
) -> list[str]:
    """How oml's signature ``ours`` breaks a caller of OML's parameters ``theirs`` (empty: it does not)."""
    P = inspect.Parameter
    mine = list(ours.parameters.values())
    if [p.kind for p in mine] == [P.VAR_POSITIONAL, P.VAR_KEYWORD]:
        return []  # oml forwards everything (checked by the object it forwards to)
    by_name = {p.name: p for p in mine}
    our_positional = [p for p in mine if p.kind <= P.POSITIONAL_OR_KEYWORD]
    has_var_kw = any(p.kind is P.VAR_KEYWORD for p in mine)
    has_var_pos = any(p.kind is P.VAR_POSITIONAL for p in mine)
    problems: list[str] = []
    their_positional = [p for p in theirs if p.kind <= P.POSITIONAL_OR_KEYWORD]
    for index, param in enumerate(their_positional):
        at = our_positional[index] if index < len(our_positional) else None
        if at is None or at.name != param.name:
            where = (
                f"oml has {at.name!r} there"
                if at is not None
                else (
                    "oml takes it by keyword only" if param.name in by_name else "oml has no parameter there"
                )
            )
            problems.append(f"position {index}: OML's {param.name!r}, {where}")
    for param in theirs:
        if param.kind is P.VAR_POSITIONAL and not has_var_pos:
            problems.append(f"OML takes *{param.name}, oml does not")
            continue
        if param.kind is P.VAR_KEYWORD:
            if not has_var_kw:
                problems.append(f"OML takes **{param.name}, oml does not")
            continue
        if param.kind is P.VAR_POSITIONAL:
            continue
        our = by_name.get(param.name)
        if our is None or our.kind in (P.VAR_POSITIONAL, P.VAR_KEYWORD):
            if not has_var_kw and param.kind is not P.POSITIONAL_ONLY:
                problems.append(f"OML's {param.name!r}: oml has no such parameter")
            continue
        if param.default is None:
            continue
        if our.default is P.empty:
            problems.append(f"OML's {param.name!r} defaults to {ast.unparse(param.default)}, oml requires it")
            continue
        value = oml_default(param.default, module, modules)
        if value is _NOT_COMPARED:
            continue
        if not _same_default(our.default, value):
            problems.append(
                f"OML's {param.name!r} defaults to {ast.unparse(param.default)}, oml's to {our.default!r}"
            )
    theirs_names = {p.name for p in theirs}
    their_var_kw = any(p.kind is P.VAR_KEYWORD for p in theirs)
    for our in mine:
        if (
            our.name not in theirs_names
            and our.default is P.empty
            and our.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY)
            and not their_var_kw
        ):
            problems.append(f"oml requires {our.name!r}, which OML does not have")
    return problems


@dataclass
class Surface:
    """The outcome of a run: what resolves and what does not."""

    modules_found: list[str] = field(default_factory=list)
    modules_missing: list[tuple[str, str]] = field(default_factory=list)  # (module, error)
    names_found: int = 0
    names_missing: list[tuple[str, str, str]] = field(default_factory=list)  # (module, name, error)
    compared: int = 0
    not_compared: list[tuple[str, str, str]] = field(default_factory=list)
    differences: list[tuple[str, str, str]] = field(default_factory=list)  # (module, name, difference)


def _signature_of(value: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(value)
    except (TypeError, ValueError):
        return None


def measure(modules: dict[str, OmlModule]) -> Surface:
    """Import ``oml_core.<path>`` for every module of OML and look each public name up in it."""
    surface = Surface()
    for path, parsed in modules.items():
        full = f"{PACKAGE}.{path}" if path else PACKAGE
        try:
            imported = importlib.import_module(full)
        except Exception as error:  # a missing module, or one that fails to import: both are "missing"
            surface.modules_missing.append((path, f"{type(error).__name__}: {error}".splitlines()[0]))
            surface.names_missing += [(path, name, "module missing") for name in parsed.public]
            continue
        surface.modules_found.append(path)
        for name in parsed.public:
            try:
                value = getattr(imported, name)
            except (
                Exception
            ) as error:  # AttributeError, or a forwarding module's OmlNameError (an ImportError)
                if f"{path}.{name}".strip(".") in modules:
                    try:  # a submodule that the package does not import: `import oml_core.<path>.<name>` works
                        value = importlib.import_module(f"{full}.{name}")
                    except Exception:
                        surface.names_missing.append(
                            (path, name, f"{type(error).__name__}: {error}".splitlines()[0])
                        )
                        continue
                else:
                    surface.names_missing.append(
                        (path, name, f"{type(error).__name__}: {error}".splitlines()[0])
                    )
                    continue
            surface.names_found += 1
            compare_one(modules, path, name, value, surface)
    return surface


def compare_one(modules: dict[str, OmlModule], path: str, name: str, value: Any, surface: Surface) -> None:
    """Compare OML's signature of ``path.name`` with oml's ``value`` (a function or a class), into ``surface``."""
    found = find_definition(modules, path, name)
    if found is None:
        return
    def_module, node = found
    if isinstance(node, ast.ClassDef):
        init = _init_of(modules, def_module, node)
        if init is None:
            return  # OML's class takes what a base outside OML takes (a dataclass, nn.Module...): not compared
        def_module, function = init
        theirs = oml_params(function, drop_first=True)
    else:
        theirs = oml_params(node, drop_first=False)
    ours = _signature_of(value)
    if ours is None:
        surface.not_compared.append((path, name, f"oml's {type(value).__name__} has no signature"))
        return
    surface.compared += 1
    for problem in compare_signature(theirs, ours, def_module, modules):
        surface.differences.append((path, name, problem))


def load_expected(path: str | None) -> dict[tuple[str, str], str]:
    """``{(module, name): reason}`` of the ``--expected`` file (``name`` ``*``: the whole module)."""
    expected: dict[tuple[str, str], str] = {}
    if path is None:
        return expected
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 3:
            raise SystemExit(
                f"{path}:{number}: expected module<TAB>name<TAB>reason, got {len(fields)} fields"
            )
        expected[(fields[0], fields[1])] = fields[2]
    return expected


def _reason(expected: dict[tuple[str, str], str], module: str, name: str) -> str | None:
    return expected.get((module, name)) or expected.get((module, "*"))


def report(
    modules: dict[str, OmlModule], surface: Surface, expected: dict[tuple[str, str], str], verbose: bool
) -> None:
    """Print the table of counts and the unexplained gaps (every line with ``verbose``)."""
    names_total = sum(len(m.public) for m in modules.values())
    missing_known = [m for m in surface.names_missing if _reason(expected, m[0], m[1])]
    diff_known = [d for d in surface.differences if _reason(expected, d[0], d[1])]
    differing = {(d[0], d[1]) for d in surface.differences}
    rows = [
        ("modules of OML", len(modules), "-"),
        ("  resolve under oml_core", len(surface.modules_found), "-"),
        (
            "  missing",
            len(surface.modules_missing),
            len({m for m, _ in surface.modules_missing if _reason(expected, m, "*")}),
        ),
        ("public names of OML", names_total, "-"),
        ("  resolve", surface.names_found, "-"),
        ("  missing", len(surface.names_missing), len(missing_known)),
        ("signatures compared", surface.compared, "-"),
        ("  names whose signature differs", len(differing), len({(d[0], d[1]) for d in diff_known})),
        ("  differences", len(surface.differences), len(diff_known)),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'':{width}}  {'count':>6}  {'of them expected':>16}")
    for label, count, known in rows:
        print(f"{label:{width}}  {count:>6}  {known!s:>16}")
    shown = [(m, n, e) for m, n, e in surface.names_missing if verbose or not _reason(expected, m, n)]
    if shown:
        print("\nmissing names" + ("" if verbose else " (not expected)") + ":")
        for module, name, error in shown:
            reason = _reason(expected, module, name)
            print(
                f"  oml.{module}.{name}".replace("..", ".")
                + (f"  [expected: {reason}]" if reason else f"  ({error})")
            )
    shown_diff = [d for d in surface.differences if verbose or not _reason(expected, d[0], d[1])]
    if shown_diff:
        print("\nsignature differences" + ("" if verbose else " (not expected)") + ":")
        for module, name, problem in shown_diff:
            reason = _reason(expected, module, name)
            print(
                f"  oml.{module}.{name}: {problem}".replace("..", ".")
                + (f"  [expected: {reason}]" if reason else "")
            )


def main(argv: list[str] | None = None) -> Surface:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("oml_src", type=Path, help="a folder holding OML's oml/ package")
    parser.add_argument("--missing", help="write the missing names not expected (module<TAB>name) here")
    parser.add_argument("--differences", help="write the signature differences not expected here")
    parser.add_argument("--expected", help="module<TAB>name<TAB>reason of the deliberate gaps")
    parser.add_argument("-v", "--verbose", action="store_true", help="list the expected gaps too")
    args = parser.parse_args(argv)
    modules = parse_tree(args.oml_src)
    expected = load_expected(args.expected)
    surface = measure(modules)
    report(modules, surface, expected, args.verbose)
    if args.missing:
        with open(args.missing, "w", encoding="utf-8") as out:
            for module, name, _ in surface.names_missing:
                if not _reason(expected, module, name):
                    out.write(f"{module}\t{name}\n")
    if args.differences:
        with open(args.differences, "w", encoding="utf-8") as out:
            for module, name, problem in surface.differences:
                if not _reason(expected, module, name):
                    out.write(f"{module}\t{name}\t{problem}\n")
    return surface


if __name__ == "__main__":
    main()

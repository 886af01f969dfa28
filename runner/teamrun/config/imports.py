"""Resolving ``module:attribute`` references to user code (tools, hooks, filters).

Only called when running a team or when ``teamrun validate --import-check``
asks for it: plain validation never executes user code. The team file's folder
is put on ``sys.path`` (and stays there, so user code can import its own
modules later), which is how a ``tools.py`` beside the team file is found.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

_TEAM_LOCAL: dict[str, Path] = {}
"""Top-level modules imported from beside a team file, and that folder."""


class ImportProblem(Exception):
    """A reference cannot be imported; the message says which part is wrong and what to do."""


def _describe(exc: BaseException) -> str:
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _put_first_on_sys_path(directory: Path) -> None:
    entry = str(directory.resolve())
    if sys.path[:1] != [entry]:
        if entry in sys.path:
            sys.path.remove(entry)
        sys.path.insert(0, entry)
        importlib.invalidate_caches()


def _local_file(top: str, base_dir: Path) -> Path | None:
    return next((p for p in (base_dir / f"{top}.py", base_dir / top / "__init__.py") if p.is_file()), None)


def _forget_other_team_module(top: str, base_dir: Path) -> None:
    """Two teams may each have a ``hooks.py`` beside them: the second must get its own.

    Only modules that teamrun itself imported from another team's folder are dropped from
    ``sys.modules``; a library module of the same name is never touched (that is reported).
    """
    origin = _TEAM_LOCAL.get(top)
    if origin is None or origin == base_dir.resolve() or _local_file(top, base_dir) is None:
        return
    for name in [n for n in sys.modules if n == top or n.startswith(f"{top}.")]:
        del sys.modules[name]


def _shadowed(module: ModuleType, top: str, base_dir: Path) -> str | None:
    """When ``top`` exists beside the team file but another module of that name was imported first."""
    found = _local_file(top, base_dir)
    origin = getattr(module, "__file__", None)
    if found is None or origin is None:
        return None
    if Path(origin).resolve().is_relative_to(base_dir.resolve()):
        return None
    return (
        f"a different module named '{top}' ({origin}) was imported first and hides {found}; "
        f"give your module a more specific name"
    )


def import_module(module_name: str, *, base_dir: Path, keep_on_path: bool = True) -> ModuleType:
    """Import a user module, telling a missing module apart from one that fails while importing.

    ``keep_on_path=False`` (validation) takes the team file's folder off ``sys.path`` again.
    """
    entry = str(base_dir.resolve())
    added = entry not in sys.path
    top = module_name.split(".")[0]
    _forget_other_team_module(top, base_dir)
    _put_first_on_sys_path(base_dir)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(f"{exc.name}.")):
            raise ImportProblem(
                f"cannot import module '{module_name}': no module named '{exc.name}' beside the team "
                f"file ({base_dir}) or on sys.path"
            ) from None
        raise ImportProblem(f"importing module '{module_name}' failed: {_describe(exc)}") from exc
    except (Exception, SystemExit) as exc:  # user code failing at import time
        raise ImportProblem(f"importing module '{module_name}' failed: {_describe(exc)}") from exc
    finally:
        if added and not keep_on_path and entry in sys.path:
            sys.path.remove(entry)
    loaded = sys.modules.get(top, module)
    shadow = _shadowed(loaded, top, base_dir)
    if shadow is not None:
        raise ImportProblem(shadow)
    if _local_file(top, base_dir) is not None:
        _TEAM_LOCAL[top] = base_dir.resolve()
    return module


def resolve_import_path(reference: str, *, base_dir: Path, keep_on_path: bool = True) -> Any:
    """Import ``package.module:attr.sub`` and return the (callable) attribute."""
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise ImportProblem(f"'{reference}' must look like 'package.module:function'")
    target: Any = import_module(module_name, base_dir=base_dir, keep_on_path=keep_on_path)
    parts = attribute.split(".")
    for depth, part in enumerate(parts):
        try:
            target = getattr(target, part)
        except AttributeError:
            owner = ".".join([module_name, *parts[:depth]])
            raise ImportProblem(f"'{owner}' has no attribute '{part}'") from None
    if not callable(target):
        raise ImportProblem(f"'{reference}' is not callable (it is a {type(target).__name__})")
    return target

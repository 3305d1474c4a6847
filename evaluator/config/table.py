"""Config sections declared as tables: each key once, with its kind, default and bounds.

Like :data:`gpu_health.evaluator.rules.params.SPECS` for rule files: a section module writes one
:class:`Table` (``evaluator/config/api.py``'s ``API``, ``file.py``'s ``SCRAPE``, ...); its
dataclass takes every default from the table, the section's unknown-key check takes the keys
from it, and :meth:`Table.read` reads every plain key through the :class:`Checker`, so the
messages are the Checker's and every problem is listed. Keys whose reading needs more than a
kind and bounds (cross-checks, nested blocks, secrets) have the kind ``"custom"``: the table
still names them and their default; the section module reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal

from gpu_health.evaluator.config.values import Checker

Kind = Literal["bool", "int", "duration", "size", "string", "optional_string", "custom"]
_PLAIN: Final = frozenset({"bool", "int", "duration", "size", "string", "optional_string"})


@dataclass(frozen=True, slots=True)
class Setting:
    """One key: ``low``..``high`` bound whole numbers (``int``), ``default`` stands in when the
    key is missing or its value is wrong (after the problem is recorded; None for a required
    ``custom`` key, which its section checks)."""

    key: str
    kind: Kind
    default: Any
    low: int | None = None
    high: int | None = None

    def __post_init__(self) -> None:
        if (self.kind == "int") != (self.low is not None and self.high is not None):
            raise ValueError(f"{self.key}: bounds go with, and only with, kind int")


@dataclass(frozen=True, slots=True)
class Table:
    """The keys of one config section, ``where`` being its dotted path (``ingest.prometheus``;
    empty for top-level keys)."""

    where: str
    settings: tuple[Setting, ...]
    defaults: Mapping[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(set(self.keys)) != len(self.keys):
            raise ValueError(f"{self.where}: a key is declared twice")
        object.__setattr__(self, "defaults",  # frozen: set once, read-only after
                           MappingProxyType({s.key: s.default for s in self.settings}))

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(s.key for s in self.settings)

    def read(self, c: Checker, raw: Mapping[str, Any], skip: tuple[str, ...] = (),
             where: str | None = None) -> dict[str, Any]:
        """Every plain key not in ``skip`` (by its kind; bad values recorded, defaults kept);
        ``where`` names a list item (``file_sd_configs[2]``) in the messages."""
        where = self.where if where is None else where
        prefix = f"{where}." if where else ""
        return {s.key: _read(c, raw, s, prefix + s.key) for s in self.settings
                if s.kind in _PLAIN and s.key not in skip}


def _read(c: Checker, raw: Mapping[str, Any], s: Setting, where: str) -> Any:
    if s.kind == "int":
        assert s.low is not None and s.high is not None  # __post_init__ holds it
        return c.integer(raw, s.key, where, s.default, s.low, s.high)
    if s.kind == "optional_string":
        return c.optional_string(raw, s.key, where)
    if s.kind == "bool":
        return c.boolean(raw, s.key, where, s.default)
    if s.kind == "duration":
        return c.duration(raw, s.key, where, s.default)
    if s.kind == "size":
        return c.size(raw, s.key, where, s.default)
    return c.string(raw, s.key, where, s.default)

"""Settings declared as tables: each key once, with its kind, default and bounds (or check).

Both kinds of file a user writes for the evaluator declare their keys this way: each section
of the config file (``config/<section>.py``: ``API``, ``SCRAPE``, ...) and a rule file's
parameters (``RULE_PARAMS`` in ``evaluator/rules/params.py``). A section's dataclass takes
every default from its table, an unknown-key check takes the keys from it, and
:meth:`Table.read` reads every plain key through the config's checker (``config/values.py``),
so the messages are the checker's and every problem is listed. Keys whose reading needs more
than a kind and bounds (cross-checks, nested blocks, secrets) have the kind ``"custom"``: the
table still names them and their default; the section module reads them. A rule parameter
carries its own ``check`` and ``help`` (rule files are coerced from YAML or the environment).

Pure declarations, below both the config and the rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal, Protocol

Kind = Literal["bool", "int", "float", "int_list", "duration", "size", "string",
               "optional_string", "custom"]
_PLAIN: Final = frozenset({"bool", "int", "duration", "size", "string", "optional_string"})


class SettingReader(Protocol):
    """How :meth:`Table.read` reads a plain key (the config's Checker): a bad value is recorded
    and the default returned."""

    def integer(self, raw: Mapping[str, Any], key: str, where: str, default: int, low: int,
                high: int) -> int: ...

    def optional_string(self, raw: Mapping[str, Any], key: str, where: str) -> str | None: ...

    def boolean(self, raw: Mapping[str, Any], key: str, where: str, default: bool) -> bool: ...

    def duration(self, raw: Mapping[str, Any], key: str, where: str, default: float) -> float: ...

    def size(self, raw: Mapping[str, Any], key: str, where: str, default: int) -> int: ...

    def string(self, raw: Mapping[str, Any], key: str, where: str, default: str) -> str: ...


@dataclass(frozen=True, slots=True)
class Setting:
    """One key: ``low``..``high`` bound whole numbers (``int``), ``default`` stands in when the
    key is missing or its value is wrong (after the problem is recorded; None for a required
    key: a ``custom`` one its section checks, a rule parameter a rule file must give).
    ``check``: a rule parameter's own check of its typed value (a problem, or None)."""

    key: str
    kind: Kind
    default: Any
    low: int | None = None
    high: int | None = None
    check: Callable[[Any], str | None] | None = field(default=None, compare=False)
    help: str = ""

    def __post_init__(self) -> None:
        bounded = self.low is not None and self.high is not None
        if (self.low is None) != (self.high is None) or (bounded and self.kind != "int"):
            raise ValueError(f"{self.key}: bounds go in pairs, with kind int only")
        if self.kind == "int" and not bounded and self.check is None:
            raise ValueError(f"{self.key}: kind int needs bounds (or a rule check)")


@dataclass(frozen=True, slots=True)
class Table:
    """The keys of one config section or file, ``where`` being its dotted path
    (``ingest.prometheus``; empty for top-level keys)."""

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

    def read(self, c: SettingReader, raw: Mapping[str, Any], skip: tuple[str, ...] = (),
             where: str | None = None) -> dict[str, Any]:
        """Every plain key not in ``skip`` (by its kind; bad values recorded, defaults kept);
        ``where`` names a list item (``file_sd_configs[2]``) in the messages."""
        where = self.where if where is None else where
        prefix = f"{where}." if where else ""
        return {s.key: _read(c, raw, s, prefix + s.key) for s in self.settings
                if s.kind in _PLAIN and s.key not in skip}


def _read(c: SettingReader, raw: Mapping[str, Any], s: Setting, where: str) -> Any:
    if s.kind == "int":
        assert s.low is not None and s.high is not None  # a config int is bounded
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

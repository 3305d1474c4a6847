"""How the store puts a statement together: one placeholder style, one way to fill a template,
and the fragments each engine's dialect supplies (pure).

- **Values** are always bound parameters named ``$name`` with a dict of values; a store module
  never writes a positional placeholder (the engines refuse a list of parameters), so a
  statement reads the same on both engines and its parameters are named where they are used.
- **Text** that varies (a table name, a column list, an engine's fragment, an optional
  condition): a statement written where it runs is an f-string; a template kept for later (a
  module constant, an engine's fragment) has ``{name}`` holes filled by :func:`fill_statement`, and
  only by it: no ``.format``, ``.replace`` or doubled braces (an architecture test keeps it
  so). A hole without a part is an error, not an empty string.
- **Engine-specific text** is a field of :class:`Dialect`; each engine has one dialect module
  beside it in ``evaluator/store/engines/`` (``duckdb_dialect``, ``postgres_dialect``) and hands
  it to the stages as ``Database.dialect`` (gpu_health.evaluator.store.db).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

_HOLE: Final = re.compile(r"\{([a-z_][a-z0-9_]*)\}")


def fill_statement(template: str, **parts: object) -> str:
    """``template`` with every ``{name}`` hole replaced by ``str(parts[name])``; a part's text
    may hold holes of its own (an engine's fragment), filled from the same parts."""

    def fill(text: str, depth: int) -> str:
        if depth > 4:
            raise ValueError("statement parts nest more than four deep (a part names itself?)")

        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in parts:
                raise KeyError(f"statement hole {name!r} has no part")
            return fill(str(parts[name]), depth + 1)

        return _HOLE.sub(one, text)

    return fill(template, 0)


def unnest_rows(names: Sequence[str], casts: Sequence[str], alias: bool = False) -> str:
    """The select list that turns one list parameter per column (``$name``, cast to ``cast[]``)
    into rows: how the store writes any number of rows in one statement. The casts are
    explicit because an all-NULL list would otherwise be typed INTEGER/NULL by DuckDB's binder.
    ``alias``: name each column after its parameter."""
    return ", ".join(f"unnest(${name}::{cast}[])" + (f" AS {name}" if alias else "")
                     for name, cast in zip(names, casts, strict=True))


@dataclass(frozen=True, slots=True)
class Dialect:
    """The text one engine needs where the shared statements cannot agree (each field's
    reason is written beside its text in the engine's dialect module)."""

    # The features statement's CTEs that read each boundary's rows: ``vals`` (a boundary's
    # values) and ``partial`` (its partial hour's count). Holes: slices, values, values_q, base_j.
    feature_boundaries: str
    # Each (time, card)'s newest row at or before the time, joined as ``r`` to ``ca``.
    feature_asof: str
    # Only the cards of shard $shard of $shards; None where the engine runs the statement
    # whole (its ``feature_shards`` is 1).
    feature_shard: str | None
    # The times of a keep-alive run (first_at .. last_at every {step_us}), one row each.
    run_times: str
    # How the statistics' period facts share the period's sealed days between the cards'
    # aggregate and the moved cards' increase points: ``MATERIALIZED`` or ``NOT MATERIALIZED``.
    facts_days: str

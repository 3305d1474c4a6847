"""Rows as NumPy columns, the way DuckDB reads and answers Python data fastest.

The store writes a batch as one list parameter per column, unnested (``sql.unnest_rows``: the
same statement on both engines). DuckDB turns every element of a list parameter into a boxed
value first: 500,000 XID rows took 4 CPU-seconds at 100,000 cards, a tenth of the first ingest
cycle. A registered dict of NumPy arrays is scanned column-wise instead (0.07 CPU-s for 100,000
rows of seven columns, against 0.98 s as lists; DuckDB 2.0.1): :func:`numpy_columns` converts
the same lists, keeping NULL as NULL (a known-flag column or NaT, never a 0). The other way,
:func:`rows_of` reads a large result's NumPy columns back into rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Final

import numpy as np

from gpu_health.evaluator.store.db import aware_column

# The NumPy type of each number or flag column, and what stands in for NULL in its values.
_NUMBERS: Final[dict[str, tuple[Any, object]]] = {
    "SMALLINT": (np.int64, 0), "INTEGER": (np.int64, 0), "BIGINT": (np.int64, 0),
    "BOOLEAN": (np.bool_, False), "DOUBLE": (np.float64, 0.0)}
_EPOCH: Final = datetime(1970, 1, 1)
_MICROSECOND: Final = timedelta(microseconds=1)
_NAT: Final = int(np.iinfo(np.int64).min)  # NaT as datetime64: DuckDB reads it as NULL


def numpy_columns(columns: Mapping[str, Sequence[object]],
                  casts: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """Each column (a list of one SQL type, None for NULL) as the arrays DuckDB scans, and the
    select list that reads them back as the columns; raises ValueError (or OverflowError) for
    a value the type cannot hold, as the cast would.

    A number or flag column holding a NULL travels as its values (NULL as 0 there) beside a
    ``<name>__known`` flag column, and is read back as ``CASE WHEN <name>__known THEN ...``:
    plain arrays only, no masked array, whose NULLs every DuckDB version would have to honour."""
    arrays: dict[str, Any] = {}
    select: list[str] = []
    for (name, values), cast in zip(columns.items(), casts, strict=True):
        value = f"CAST({name} AS {cast})"
        if cast == "TIMESTAMP":
            arrays[name] = _timestamps(values)
        elif cast not in _NUMBERS:
            arrays[name] = np.array(values, dtype=object)  # VARCHAR: str or None, read as such
        elif None in values:
            dtype, fill = _NUMBERS[cast]
            arrays[name] = np.array([fill if v is None else v for v in values], dtype=dtype)
            arrays[f"{name}__known"] = np.array([v is not None for v in values], dtype=np.bool_)
            value = f"CASE WHEN {name}__known THEN {value} END"
        else:
            arrays[name] = np.array(values, dtype=_NUMBERS[cast][0])
        select.append(value)
    return arrays, select


def rows_of(columns: Mapping[str, Any], times: Sequence[int]) -> list[tuple[Any, ...]]:
    """Rows from DuckDB's ``fetchnumpy`` columns, as ``fetchall`` gives them: ``tolist`` turns
    each cell into the Python value (a NULL, masked, into None; a TIMESTAMP, datetime64[us],
    into a naive datetime, made aware for the columns at positions ``times``)."""
    lists = [array.tolist() for array in columns.values()]
    for i in times:
        lists[i] = aware_column(lists[i])
    return list(zip(*lists, strict=True))


def _timestamps(values: Sequence[object]) -> Any:
    """Naive-UTC datetimes (None: NaT, read as NULL). A batch repeats few instants (one per
    scrape), so each distinct one is converted once: NumPy's own conversion took 1 CPU-s for
    500,000 datetimes."""
    micros: dict[object, int] = {None: _NAT}
    for value in set(values) - {None}:
        if not isinstance(value, datetime) or value.tzinfo is not None:
            raise ValueError(f"not a naive-UTC datetime: {value!r}")
        micros[value] = (value - _EPOCH) // _MICROSECOND
    return np.array([micros[v] for v in values], dtype=np.int64).astype("datetime64[us]")

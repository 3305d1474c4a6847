"""PostgreSQL's dialect: what lets one statement run on both engines (DuckDB's functions defined
for PostgreSQL, DuckDB's placeholders rewritten for psycopg) and PostgreSQL's text where the
shared statements cannot agree (:data:`DIALECT`). Pure (no driver import); used by the
PostgreSQL store only.

The store's statements are DuckDB SQL that PostgreSQL also accepts once these exist (created
with ``CREATE OR REPLACE`` at every start, under the migration lock, so an upgraded evaluator
replaces them):

- ``epoch_us(ts)``, ``to_microseconds(n)``, ``to_seconds``/``to_minutes``/``to_hours``/
  ``to_days``, ``hour(ts)``, ``datediff('hour', a, b)``;
- ``a // b`` on BIGINTs: DuckDB's integer division truncates toward zero, like PostgreSQL's
  ``/`` on integers (DuckDB's ``/`` is a float division, so the store never uses it on counts).
  A user-defined operator binds more loosely than ``*`` and ``-`` in PostgreSQL (DuckDB gives
  ``//`` the precedence of ``/``), so the statements always parenthesise ``(a // b)``;
- ``sha256(text)``: the hex digest, as DuckDB's;
- ``hash(text)``: non-negative (the sealing splits nodes by ``hash(node) % parts``, and every
  part number must be reachable); it need not equal DuckDB's, only be stable;
- ``list_contains``, ``list_value``, ``list_slice`` (1-based, inclusive), ``list_sum``;
- ``arg_min_null``/``arg_max_null`` (the value at the least/greatest key, a NULL value kept,
  rows with a NULL key skipped) for BIGINT and text values keyed by TIMESTAMP (the only pairs
  the store uses); ``any_value`` (PostgreSQL 16 has it, 15 does not).

One rewrite instead of a definition, where a definition measured too slow: ``arg_min(v, k)`` /
``arg_max(v, k)`` on BIGINT values (every use in the store) become
``(min(ARRAY[gpu_health_order_us(k), v]) FILTER (WHERE v and k known))[2]``, built-in
aggregates on arrays, which compare element by element. A SQL-language transition function
costs ~2 us per row; the tick's feature statement calls five per row (bench.postgres, 1,024
cards x 37 days: the statement took 2.5 s, 0.25 s of it with the rewrite; 1 M rows grouped:
2.0 s against 0.23 s). Ties on the key pick the least or greatest value, where DuckDB picks any.
The key is ``date_part``'s float epoch in microseconds, not ``epoch_us`` (``extract`` is
numeric): 15% less for the feature probes at 4,096 cards, and exact to the microsecond within
about 285 years of 1970 (a double's 53 bits), which is all that ordering needs.
"""

from __future__ import annotations

import functools
import re
from typing import Final

from gpu_health.evaluator.store.sql import Dialect

_SQL = "LANGUAGE sql IMMUTABLE PARALLEL SAFE"


def _arg_null_aggregate(kind: str, value: str) -> tuple[str, ...]:
    """``arg_min_null``/``arg_max_null`` for one value type, keyed by TIMESTAMP."""
    state = f"gpu_health_arg_{value}"
    cmp = "<" if kind == "min" else ">"
    name = f"arg_{kind}_null"
    step = f"gpu_health_{name}_{value}_step"
    return (
        f"CREATE OR REPLACE FUNCTION {step}(s {state}, v {value}, k timestamp) "
        f"RETURNS {state} {_SQL} AS $$ SELECT CASE WHEN k IS NULL THEN s "
        f"WHEN s IS NULL OR (s).k IS NULL OR k {cmp} (s).k THEN ROW(v, k)::{state} "
        "ELSE s END $$",
        f"CREATE OR REPLACE FUNCTION {step}_final(s {state}) RETURNS {value} {_SQL} "
        "AS $$ SELECT (s).v $$",
        f"CREATE OR REPLACE AGGREGATE {name}({value}, timestamp) (SFUNC = {step}, "
        f"STYPE = {state}, FINALFUNC = {step}_final)",
    )


def _retired() -> tuple[str, ...]:
    """Definitions earlier releases created and nothing calls: ``arg_min``/``arg_max`` as
    aggregates (every call is rewritten before it reaches PostgreSQL, see below)."""
    return tuple(
        sql for kind in ("min", "max") for value in ("bigint", "text") for sql in (
            f"DROP AGGREGATE IF EXISTS arg_{kind}({value}, timestamp)",
            f"DROP FUNCTION IF EXISTS gpu_health_arg_{kind}_{value}_step_final("
            f"gpu_health_arg_{value})",
            f"DROP FUNCTION IF EXISTS gpu_health_arg_{kind}_{value}_step("
            f"gpu_health_arg_{value}, {value}, timestamp)"))


def _types() -> tuple[str, ...]:
    return tuple(
        f"DO $$ BEGIN IF to_regtype('gpu_health_arg_{v}') IS NULL THEN "
        f"CREATE TYPE gpu_health_arg_{v} AS (v {v}, k timestamp); END IF; END $$"
        for v in ("bigint", "text"))


COMPAT: Final[tuple[str, ...]] = (
    f"CREATE OR REPLACE FUNCTION epoch_us(t timestamp) RETURNS bigint {_SQL} "
    "AS $$ SELECT (extract(epoch FROM t) * 1000000)::bigint $$",
    f"CREATE OR REPLACE FUNCTION gpu_health_order_us(t timestamp) RETURNS bigint {_SQL} "
    "AS $$ SELECT (date_part('epoch', t) * 1000000)::bigint $$",
    f"CREATE OR REPLACE FUNCTION to_microseconds(n bigint) RETURNS interval {_SQL} "
    "AS $$ SELECT make_interval(secs => n::numeric / 1000000) $$",
    *(f"CREATE OR REPLACE FUNCTION to_{unit}s(n double precision) RETURNS interval {_SQL} "
      f"AS $$ SELECT n * INTERVAL '1 {unit}' $$" for unit in ("second", "minute", "hour", "day")),
    f"CREATE OR REPLACE FUNCTION hour(t timestamp) RETURNS integer {_SQL} "
    "AS $$ SELECT extract(hour FROM t)::integer $$",
    f"CREATE OR REPLACE FUNCTION datediff(part text, a timestamp, b timestamp) RETURNS bigint "
    f"{_SQL} AS $$ SELECT CASE WHEN part = 'hour' THEN (extract(epoch FROM "
    "date_trunc('hour', b) - date_trunc('hour', a)) / 3600)::bigint END $$",
    f"CREATE OR REPLACE FUNCTION gpu_health_intdiv(a bigint, b bigint) RETURNS bigint {_SQL} "
    "AS $$ SELECT a / b $$",
    "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_operator WHERE oprname = '//') THEN "
    "CREATE OPERATOR // (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = gpu_health_intdiv); "
    "END IF; END $$",
    f"CREATE OR REPLACE FUNCTION sha256(x text) RETURNS text {_SQL} "
    "AS $$ SELECT encode(sha256(convert_to(x, 'UTF8')), 'hex') $$",
    f"CREATE OR REPLACE FUNCTION hash(x text) RETURNS bigint {_SQL} "
    "AS $$ SELECT hashtext(x)::bigint & 2147483647 $$",
    f"CREATE OR REPLACE FUNCTION list_contains(l anyarray, x anyelement) RETURNS boolean {_SQL} "
    "AS $$ SELECT x = ANY(l) $$",
    f"CREATE OR REPLACE FUNCTION list_value(VARIADIC l anyarray) RETURNS anyarray {_SQL} "
    "AS $$ SELECT l $$",
    f"CREATE OR REPLACE FUNCTION list_slice(l anyarray, a bigint, b bigint) RETURNS anyarray "
    f"{_SQL} AS $$ SELECT l[a:b] $$",
    # PL/pgSQL, not SQL: a SQL function with a FROM is not inlined and cost ~5 us per call
    # (the tick's feature statement sums 32,768 day slices at 4,096 cards: 184 ms, now 67 ms)
    "CREATE OR REPLACE FUNCTION list_sum(l bigint[]) RETURNS bigint LANGUAGE plpgsql IMMUTABLE "
    "STRICT PARALLEL SAFE AS $$ DECLARE s bigint; x bigint; BEGIN FOREACH x IN ARRAY l LOOP "
    "IF x IS NOT NULL THEN s := coalesce(s, 0) + x; END IF; END LOOP; RETURN s; END $$",
    f"CREATE OR REPLACE FUNCTION gpu_health_any_step(s anyelement, v anyelement) "
    f"RETURNS anyelement {_SQL} AS $$ SELECT coalesce(s, v) $$",
    "CREATE OR REPLACE AGGREGATE any_value(anyelement) (SFUNC = gpu_health_any_step, "
    "STYPE = anyelement)",
    *_types(),
    *(sql for kind in ("min", "max") for value in ("bigint", "text")
      for sql in _arg_null_aggregate(kind, value)),
    *_retired(),
)


_ARG: Final = re.compile(r"arg_(min|max)\(")
_FILTER: Final = re.compile(r"\s*FILTER\s*\(\s*WHERE\s", re.IGNORECASE)


def _opaque_end(sql: str, i: int) -> int:
    """Where a string literal, quoted name, comment or dollar-quoted body starting at ``i``
    ends (the index after it); ``i`` when none starts there. Its text is neither SQL to
    rewrite nor a placeholder. One unterminated runs to the end."""
    ch, n = sql[i], len(sql)
    if ch in "'\"":  # 'it''s' reads as two adjacent literals: the same for both uses
        end = sql.find(ch, i + 1)
        return n if end < 0 else end + 1
    for opening, closing, keep in (("--", "\n", 0), ("/*", "*/", 2), ("$$", "$$", 2)):
        if sql.startswith(opening, i):
            end = sql.find(closing, i + len(opening))
            return n if end < 0 else end + keep
    return i


def _closing(sql: str, start: int) -> tuple[int, list[str]] | None:
    """From just inside an opening parenthesis: the index after its closing one, and the
    top-level comma-separated parts between them (literals and comments skipped); None when it
    never closes."""
    depth, part, i = 0, start, start
    parts: list[str] = []
    while i < len(sql):
        if (skip := _opaque_end(sql, i)) != i:
            i = skip
            continue
        ch = sql[i]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            if depth == 0:
                return i + 1, [*parts, sql[part:i].strip()]
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(sql[part:i].strip())
            part = i + 1
        i += 1
    return None


def _arg_call(sql: str, i: int) -> tuple[int, str] | None:
    """An ``arg_min(v, k)``/``arg_max(v, k)`` call (with its ``FILTER``) starting at ``i``:
    the index after it and its rewrite; None when there is none (or it does not parse: then
    the statement goes to PostgreSQL as written, which names the error)."""
    if (m := _ARG.match(sql, i)) is None or (i and (sql[i - 1].isalnum() or sql[i - 1] == "_")):
        return None
    call = _closing(sql, m.end())
    if call is None or len(call[1]) != 2:
        return None
    end, (value, key) = call
    condition = f"({value}) IS NOT NULL AND ({key}) IS NOT NULL"
    if (f := _FILTER.match(sql, end)) is not None:
        extra = _closing(sql, f.end())
        if extra is None or len(extra[1]) != 1:
            return None
        end, condition = extra[0], f"{condition} AND ({extra[1][0]})"
    return end, (f"({m.group(1)}(ARRAY[gpu_health_order_us({key}), {value}]) "
                 f"FILTER (WHERE {condition}))[2]")


@functools.lru_cache(maxsize=1024)
def rewrite(sql: str) -> str:
    """``arg_min``/``arg_max`` (with an optional ``FILTER``) as array min/max (module doc);
    string literals, quoted names and comments are left as they are."""
    out: list[str] = []
    i = done = 0
    while i < len(sql):
        if (skip := _opaque_end(sql, i)) != i:
            i = skip
        elif (call := _arg_call(sql, i)) is not None:
            out += [sql[done:i], call[1]]
            i = done = call[0]
        else:
            i += 1
    out.append(sql[done:])
    return "".join(out)


@functools.lru_cache(maxsize=1024)
def to_pyformat(sql: str) -> str:
    """The store's ``$name`` placeholders -> psycopg's ``%(name)s``, ``%`` -> ``%%``; string
    literals, quoted names, dollar-quoted bodies and comments are left alone (the scanner
    :func:`rewrite` uses)."""
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if (skip := _opaque_end(sql, i)) != i:
            out.append(sql[i:skip].replace("%", "%%"))
            i = skip
        elif ch == "$" and i + 1 < n and (sql[i + 1].isalpha() or sql[i + 1] == "_"):
            j = i + 1
            while j < n and (sql[j].isalnum() or sql[j] == "_"):
                j += 1
            out.append(f"%({sql[i + 1:j]})s")
            i = j
        else:
            out.append("%%" if ch == "%" else ch)
            i += 1
    return "".join(out)


# -- PostgreSQL's text where the shared statements cannot agree
# (gpu_health.evaluator.store.sql.Dialect) --

# The rows next to each boundary: an index range scan per card and boundary instead of
# DuckDB's scanned and hash-joined slices (why, and what it cost, in the statement's comments).
_BOUNDARIES: Final = """vals AS (
    -- each boundary's rows in [b - max_age, b] (its values) and [hour of b, b] (the partial
    -- hour of the baseline count) by one index range scan of its card, aggregated inside the
    -- probe: grouping the probes' rows afterwards sorted 266,000 rows, and a second probe per
    -- partial hour cost 0.13 s, of the statement's 1.4 s at 4,096 cards
    SELECT p.ev, p.node_id, p.gpu_index, p.j, s.*
    FROM points p
    CROSS JOIN LATERAL (
        SELECT {values_q},
               count(q.ecc_corrected_total) FILTER (
                   WHERE q.sampled_at >= date_trunc('hour', p.b)) AS n
        FROM gpu_health_samples q
        WHERE q.node_id = p.node_id AND q.gpu_index = p.gpu_index AND q.source = $source
          AND q.sampled_at <= p.b AND coalesce(q.gpu_uuid, '') = p.ukey
          AND q.sampled_at >= least(p.b - to_seconds($max_age), date_trunc('hour', p.b))) s
),
partial AS (
    -- rows in [trunc(x), x] for x = t0 (added) and x = t0 - B (already in whole, subtracted)
    SELECT ev, node_id, gpu_index, j, n FROM vals WHERE j IN (0, {base_j})
),"""

# Each (time, card)'s newest row at or before the time: PostgreSQL has no ASOF JOIN; a LATERAL
# ... LIMIT 1 probe is its index-backed equivalent (one index descent per card and time on the
# samples' index, not the materialised CTE).
_ASOF: Final = """CROSS JOIN LATERAL (
        SELECT q.sampled_at, q.gpu_uuid FROM gpu_health_samples q
        WHERE q.node_id = ca.node_id AND q.gpu_index = ca.gpu_index AND q.source = $source
          AND q.sampled_at <= ca.ev AND q.sampled_at <= $hi
        ORDER BY q.sampled_at DESC LIMIT 1) r"""

DIALECT: Final = Dialect(
    feature_boundaries=_BOUNDARIES,
    feature_asof=_ASOF,
    # One statement runs on one core, so the store runs a shard of the cards per pool
    # connection; every part of the statement follows its scans' cards.
    feature_shard=" AND abs(hashtext(s.node_id)::BIGINT + s.gpu_index) % $shards = $shard",
    # generate_series is a set-returning function, allowed in PostgreSQL's select list.
    run_times="generate_series(first_at, last_at, to_microseconds({step_us}))",
    # Materialised, 151,552 rows (4,096 cards x 37 days) went to a temporary file (work_mem)
    # and the CTE scan took 272 ms; inlined, the aggregate scans the table (57 ms) and the
    # moved cards' part reads only theirs: the statement 0.40 -> 0.28 s, the same rows.
    facts_days="NOT MATERIALIZED",
)

"""What the migrations share: statements for one engine only, the counter columns, and
PostgreSQL's byte-wise text comparison."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from gpu_health.contract import COUNTER_KEYS


@dataclass(frozen=True, slots=True)
class Only:
    """A statement for one engine (``duckdb`` or ``postgresql``): an index one of them needs."""

    engine: str
    sql: str


# (number, what it does, statements). Once shipped, a migration never changes: add a new one.
Migration = tuple[int, str, tuple[str | Only, ...]]
COUNTER_COLUMNS: Final = ",\n    ".join(f"{key} BIGINT" for key in COUNTER_KEYS)


def bytewise(tables: str) -> str:
    """PostgreSQL: every VARCHAR column of the tables LIKE ``tables`` compares byte by byte."""
    return f"""DO $$ DECLARE c record; BEGIN
    FOR c IN SELECT table_name, column_name FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name LIKE '{tables}'
               AND data_type = 'character varying' LOOP
        EXECUTE format('ALTER TABLE %I ALTER COLUMN %I TYPE VARCHAR COLLATE "C"',
                       c.table_name, c.column_name);
    END LOOP; END $$"""

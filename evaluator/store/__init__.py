"""The store: the only package that talks to a database.

``db.Database`` is the interface the stages use (statements counted, driver errors wrapped,
transactions, migrations, the thread pool); ``engines/`` holds the two engines beside each other
and is the only place that imports a driver (``duckdb``, ``psycopg``); ``Database`` is also the
one door where times become naive UTC and back. Below that core (``db``, ``sql``,
``conflicts``, ``rollup_sql``, ``migrations/``) one folder per stage of the data path holds typed
query sets over ``Database``, written once in SQL both engines accept: ``readings/``,
``predictions/``, ``statistics/``, ``operations/`` (alerts, the drain audit, the leader lease)
and ``history/`` (a backtest's file, the first-start import's marker).
"""

from gpu_health.evaluator.store.db import Database

__all__ = ["Database"]

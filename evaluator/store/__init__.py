"""The store: the only package that talks to a database.

``db.Database`` is the interface the stages use (statements counted, driver errors wrapped,
transactions, migrations, the thread pool); ``engines/`` holds the two engines beside each other
and is the only place that imports a driver (``duckdb``, ``psycopg``). The other modules of this
package are typed query sets over ``Database`` (samples, predictions, stats, ...), written once
in SQL both engines accept.
"""

from gpu_health.evaluator.store.db import Database

__all__ = ["Database"]

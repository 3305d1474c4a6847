"""The store: the only package that imports duckdb.

``db.Database`` owns the connection, migrations, statement counting and error wrapping; the
other modules of this package are typed query sets over it (samples, predictions, stats, ...).
"""

from evaluator.store.db import Database

__all__ = ["Database"]

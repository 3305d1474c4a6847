"""The store's engines, beside each other: :mod:`gpu_health.evaluator.store.engines.duckdb` (the
embedded default) and :mod:`gpu_health.evaluator.store.engines.postgres` (several evaluators on one
store), with PostgreSQL's dialect layer in
:mod:`gpu_health.evaluator.store.engines.postgres_dialect`. Each implements
:class:`gpu_health.evaluator.store.db.Database`; only this package imports a database driver."""

"""The store's engines, beside each other: :mod:`evaluator.store.engines.duckdb` (the embedded
default) and :mod:`evaluator.store.engines.postgres` (several evaluators on one store), with
PostgreSQL's dialect layer in :mod:`evaluator.store.engines.postgres_dialect`. Each implements
:class:`evaluator.store.db.Database`; only this package imports a database driver."""

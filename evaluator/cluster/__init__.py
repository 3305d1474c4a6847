"""Several evaluators on one PostgreSQL store (docs/ha.md): membership and the leader
lease (``membership``), and which member scrapes which target (``assign``, pure)."""

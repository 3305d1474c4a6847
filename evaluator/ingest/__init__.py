"""Readings in, one stage per module: discovery -> scrape -> exposition -> cards -> write rule
+ dedup -> cycle (docs/evaluator-ingest.md), or the other source, ``prometheus/``
(docs/prometheus-source.md), into the same ingestor. Its settings are ``config/scrape.py``,
``config/discovery.py`` and ``config/source.py``; what it writes, ``store/readings/``; its
wiring, ``compose/readings.py``.
"""

"""Figures computed from the store: the prediction statistics (``document``: the API's JSON,
``intervals``: Wilson intervals, ``differences``: one version against another), what a loop
keeps for /metrics (``state_collector``, read through ``snapshot_families``) and the hourly ECC
increases of one card (``ecc_rate``). All pure but ``state_collector``; the queries behind
them are ``store/statistics/``, the HTTP answers ``http/api/``.
"""

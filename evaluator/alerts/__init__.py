"""GPU_FAULT_PREDICTED alerts (docs/alerting.md): pure payload building (``payload``), the
Alertmanager pusher (``pusher``), their self-metrics (``alert_metrics``) and the loop that
derives alert state from the store and pushes it (``alert_loop``).

The rest of the feature, one module each: its settings, ``config/alerting.py`` (the
``alerting`` section); its state, ``store/operations/alerts.py`` (``gpu_health_alerts`` and the
audit); its HTTP action, ``http/api/alerts.py`` (resolve by hand); its wiring, ``_alert_loop``
in ``compose/__init__.py``.
"""

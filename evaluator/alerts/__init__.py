"""GPU_FAULT_PREDICTED alerts: pure payload building (``payload``), the Alertmanager pusher
(``pusher``), their self-metrics (``metrics``) and the loop that derives alert state from the
store and pushes it (``loop``). See docs/alerting.md."""

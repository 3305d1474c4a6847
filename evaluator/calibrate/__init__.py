"""``gpu-health-evaluator calibrate``: from a fleet's own history to a better rule version.

The period is split by time (:mod:`~gpu_health.evaluator.calibrate.split`); every candidate of a
search space (:mod:`~gpu_health.evaluator.calibrate.space`) is replayed over the whole history by
the shared replay (:mod:`gpu_health.evaluator.backtest.batch`); the choice is made on the earlier
part alone (:mod:`~gpu_health.evaluator.calibrate.choose`), and the chosen version, the base and the
baselines are then judged on the later part it was not tuned on, with Wilson intervals
(:mod:`~gpu_health.evaluator.calibrate.scores`). A version that wins there is written as a new rule
file (:mod:`~gpu_health.evaluator.calibrate.rulefile`) to be run as a shadow before anyone makes it
active. docs/calibration.md tells the whole story with real runs.
"""

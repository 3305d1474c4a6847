"""Prediction rules: parameters, rule-set loading, and the pure signal engine.

- ``params``: the rule parameters (``RULE_PARAMS``, declared like the config's sections), their
  valid ranges and which of them are frozen into a version;
- ``ruleset``: loading ``rules/<version>.yaml`` plus ``GPU_HEALTH_RULE_*`` overrides into a
  :class:`~gpu_health.evaluator.rules.ruleset.RuleSet` (the environment comes in as a mapping);
- ``faults``: the fault-event definitions (uncorrectable ECC, memory XIDs) a rule set freezes;
- ``evaluation`` and ``signals``: features in, decisions out; no I/O, no clock (``signals`` is
  each rule written once: the worker, the backtest and their fast paths over raw rows ask it);
  ``weak_signals``: the weak layer's members (health beyond memory), which never fire alone;
- ``outcome``: hit, miss or voided from what a window showed; ``actions``: the recommended-
  action policy.

The start-up registration of the effective version in the store is
``store/predictions/rule_versions.py`` (it refuses a changed rule file); this package imports no
store.
"""

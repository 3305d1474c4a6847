"""Prediction rules: parameters, rule-set loading, and the pure signal engine.

- ``params``: the rule parameters, their valid ranges and which of them are frozen into a version;
- ``ruleset``: loading ``rules/<version>.yaml`` plus ``GPU_HEALTH_RULE_*`` overrides (the only
  module here that reads the environment) into a
  :class:`~gpu_health.evaluator.rules.ruleset.RuleSet`;
- ``faults``: the fault-event definitions (uncorrectable ECC, memory XIDs) a rule set freezes;
- ``model`` and ``signals``: features in, decisions out; no I/O, no clock;
- ``registry``: start-up registration of the effective version in the store (refuses a changed
  rule file).

Import the submodules directly; this package re-exports nothing so that the store (which builds
``model.CardFeatures``) and ``registry`` (which uses the store) never import each other in a cycle.
"""

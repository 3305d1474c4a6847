"""The evaluator's settings: ``file.Config`` has one field per top-level key of the config
file, each section a dataclass declared beside its table (``table.Table``) in the section's
module; ``values.Checker`` lists every problem at once. The rule and action-policy files are
read by ``rules``.
"""

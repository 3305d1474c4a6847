"""Opt-in remediation: drain Slurm nodes for predicted faults (docs/slurm.md): which alert
drains or resumes which node and the caps (``policy``, pure), Slurm's commands (``slurm``) and
the leader's loop (``drain_loop``: read, decide, run, audit).

The rest of the feature, one module each: its settings, ``config/remediation.py`` (the
``remediation`` section); its audit, ``store/operations/remediation.py``; its wiring,
``compose/remediation.py``; the Nagios ``check`` that reads it back, ``check.py``.
"""

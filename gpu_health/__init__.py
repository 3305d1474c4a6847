"""Shared pieces of gpu-health: the exception hierarchy, the exporter metric contract, the
clock and time formats, and the few edges both programs own once (``runner``: outside tools;
``files``: bounded file reads and writes; ``webguard``: the web config file, TLS and basic
auth, re-read while running).

Both programs (``exporter`` on the GPU node, ``evaluator`` beside Prometheus) import from here;
the modules that touch the outside are named for it, the rest is pure.
"""

__version__ = "0.1.0"

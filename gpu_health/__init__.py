"""Shared pieces of gpu-health: the exception hierarchy and the exporter metric contract.

Both programs (``exporter`` on the GPU node, ``evaluator`` beside Prometheus) import from here;
nothing in this package does I/O.
"""

__version__ = "0.1.0"

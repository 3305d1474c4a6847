"""``gpu-health-evaluator simulate``: pure fault profiles (``profiles``), the options, and
the writer that puts simulated rows through the live write rule (``writer``), labelled
``simulated`` so they never reach real statistics or alerts.
"""

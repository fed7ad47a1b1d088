"""Goldens and checks: the golden file format and live transformers forwards (golden.py),
greedy generation (greedy_golden.py), hooks capturing intermediates (capture.py), the pass rule and
report (report.py), text metrics (text_metrics.py) and node-by-node diagnosis (diagnose.py)."""

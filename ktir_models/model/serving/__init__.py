"""Serving: continuous batching of requests over a paged KV cache, checked against transformers.

``requests.py`` reads the JSON Lines requests file, ``pool.py`` holds the KV block pool,
``scheduler.py`` admits requests and plans each step (one prefill chunk plus decode rows),
``tables.py`` turns a plan into the host tables a step program binds, ``engine.py`` runs the step
programs (``model/emit/serving.py``) on one machine, ``check.py`` compares with transformers,
``run.py`` ties them together and ``report.py`` says what happened. docs/serving.md has the design.
"""

from .report import RequestResult, ServeReport, StepRecord
from .requests import Request, RequestsError, read_requests
from .run import ServeOptions, serve_requests

__all__ = ["Request", "RequestResult", "RequestsError", "ServeOptions", "ServeReport", "StepRecord",
           "read_requests", "serve_requests"]

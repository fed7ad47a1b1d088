"""A pytest plugin that runs a suite written for the reference interpreter on ours:
``pytest -p ktir_models.compat.pytest_plugin`` (or ``addopts = -p ktir_models.compat.pytest_plugin``
in the suite's ini file). ``ktir_cpu`` is installed before conftest files load and before
collection, so test modules' ``import ktir_cpu`` gets :mod:`ktir_models.compat`."""

from __future__ import annotations

import pytest

from .install import install_as_ktir_cpu


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args) -> None:
    install_as_ktir_cpu()


def pytest_configure(config) -> None:
    install_as_ktir_cpu()  # plugins loaded after the initial conftests (idempotent)


def pytest_report_header(config) -> str:
    return "ktir_cpu: ktir_models.compat (install_as_ktir_cpu)"

"""A pytest plugin for ``make test-book`` (``-p never_skip``): there a skipped test, or a module skipped at
import, fails.

The book's tests skip themselves when the book's tools are missing, so that ``make test`` runs without them.
``make test-book`` (which ``.ci/run`` calls) installs the tools it needs and must run every test it names:
a skip there would hide a test that never ran, so it is reported as a failure, with the skip's reason.
"""
from __future__ import annotations

import pytest


def _fail_if_skipped(report, what: str) -> None:
    if report.skipped:
        report.outcome = "failed"
        report.longrepr = f"{what} was skipped, and make test-book allows no skip: {report.longrepr}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_if_skipped(outcome.get_result(), f"collecting {collector.nodeid}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_if_skipped(outcome.get_result(), item.nodeid)

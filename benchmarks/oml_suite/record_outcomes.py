"""pytest plugin: append '<outcome>\t<duration>\t<nodeid>\t<crash message>' per test to $RECORD_OUTCOMES_FILE."""

import os

_path = os.environ["RECORD_OUTCOMES_FILE"]


def _message(report):
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else (str(report.longrepr) if report.longrepr else "")
    return " | ".join(text.splitlines())[:400].replace("\t", " ")


def pytest_runtest_logreport(report):
    failed_phase = report.when in ("setup", "teardown") and report.outcome != "passed"
    if report.when == "call" or failed_phase:
        outcome = report.outcome if report.when == "call" else f"{report.outcome}_{report.when}"
        msg = _message(report) if report.outcome != "passed" else ""
        with open(_path, "a") as f:
            f.write(f"{outcome}\t{report.duration:.2f}\t{report.nodeid}\t{msg}\n")


def pytest_collectreport(report):
    if report.failed:
        with open(_path, "a") as f:
            f.write(f"collect_error\t0\t{report.nodeid}\t{_message(report)}\n")

"""pytest plugin used by scripts/test-all.sh: no progress character for a skipped test (the cuda
parametrisations skip by the hundred on machines without a GPU); the reasons still appear, grouped,
in the short summary (-rs)."""


def pytest_report_teststatus(report, config):
    if report.skipped and report.when in ("setup", "call"):
        return "skipped", "", "SKIPPED"
    return None

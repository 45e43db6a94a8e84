"""Comparison report of a sweep: which tricks are worth their compute, which hurt combined."""

from grpo_lab.report.build import write_report
from grpo_lab.report.inputs import ReportData
from grpo_lab.report.verdicts import VerdictPolicy

__all__ = ["ReportData", "VerdictPolicy", "write_report"]

"""The verifying executor: replays a Program and proves it free of races, flag misuse and
deadlocks, checks memory placement, timetable conformance and (optionally) the numbers.

Entry point: :func:`verify`. See ``docs/verification.md``.
"""

from staticsched.verify.api import verify
from staticsched.verify.replay import retime
from staticsched.verify.report import CHECKS, Finding, Report

__all__ = ["CHECKS", "Finding", "Report", "retime", "verify"]

"""End-of-run summary tables that work under pytest-xdist.

A test adds a row with ``request.node.user_properties.append((SUMMARY_ROW, (section, header, row)))``.
Rows travel inside the test's report, so the process that prints the terminal summary (the
xdist controller, or the only process) sees every row, whichever process ran the test.
tests/conftest.py collects them and prints one section per title, rows sorted by their first
column when it is a number.
"""

from __future__ import annotations

SUMMARY_ROW = "mirrorline_summary_row"


def sort_key(row: str) -> tuple[int, str]:
    """Numbered rows (``"5 remote topic ..."``) in number order, others after them."""
    first = row.split(maxsplit=1)[0] if row.strip() else ""
    return (int(first), row) if first.isdigit() else (10 ** 9, row)

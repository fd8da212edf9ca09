"""Audit reports: built once from the DB (``report``), rendered as JSON / CSV / JUnit / Markdown / HTML."""

"""Outbound campaigns: definition, durable store, scheduler, dialer and reports.

- :mod:`.definition` reads a campaign YAML and its contacts CSV.
- :mod:`.policy` is the scheduler's pure decision logic (windows, retries, DNC, pacing).
- :mod:`.store` keeps campaigns durable (SQLAlchemy async: SQLite or PostgreSQL).
- :mod:`.dialer` is the async loop that leases due contacts and dials them.
- :mod:`.dispatch` places calls: the in-process simulator or LiveKit.
- :mod:`.report` writes the CSV and HTML report.
"""

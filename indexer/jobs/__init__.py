"""Background jobs (audits, server-side index runs): a DB-backed queue with leases, and a worker."""

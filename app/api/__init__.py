"""The REST API (``/api/v1``): one router per resource under ``routes/``."""

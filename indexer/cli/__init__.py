"""The ``splitaudit`` command line."""

"""The review UI: server-rendered Jinja2 pages under ``/ui`` over the ``indexer`` query functions."""

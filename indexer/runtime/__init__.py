"""The runtime layer above the engines: job handlers (what each queued job kind runs)."""

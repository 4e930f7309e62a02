"""Default configs of the loggers: ``logger/<name>.yaml``, one per registered name (offline where the client
has an offline mode)."""

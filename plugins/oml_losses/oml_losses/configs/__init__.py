"""Default configs of the losses and miners: ``loss/<name>.yaml`` and ``miner/<name>.yaml``, one per name."""

"""Default configs of the plugin: ``loss/pml_<name>.yaml`` and ``miner/pml_<name>.yaml``, one per registered name."""

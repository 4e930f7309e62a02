"""Hook implementations of the plugin."""

"""Small helpers shared by the core and every plugin."""

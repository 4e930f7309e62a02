"""oml plugin package."""

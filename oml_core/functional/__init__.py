"""Pure tensor functions shared by the core and the plugins (retrieval metrics, ...)."""

"""Default configs of the texts dataset component and the text extractor: ``<kind>/<name>.yaml``."""

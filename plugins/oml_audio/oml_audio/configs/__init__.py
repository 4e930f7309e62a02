"""Default configs of the audio dataset component and extractor: ``<kind>/<name>.yaml``, one per name."""

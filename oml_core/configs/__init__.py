"""Default hydra configs of the pipelines; they run on the built-in mock dataset out of the box."""

"""Default configs of the samplers, one ``sampler/<name>.yaml`` per registered sampler name."""

"""PyTorch Lightning integration: modules, callbacks and config-driven pipelines."""

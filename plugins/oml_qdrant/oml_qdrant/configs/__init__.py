"""Default config of the Qdrant kNN backend: ``knn_backend/qdrant.yaml``."""

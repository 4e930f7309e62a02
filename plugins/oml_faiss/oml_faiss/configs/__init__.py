"""Default configs of the faiss kNN backends: ``knn_backend/<name>.yaml``, one per name."""

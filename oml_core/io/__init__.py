"""Files of embeddings: writing them batch by batch and reading them back, as Parquet, ``.npy`` (with a JSON
sidecar) or OML's ``predictions.json`` (:mod:`.embeddings_files`), with the provenance of the vectors: the
extractor spec, the digest of its weights and the transforms (:mod:`.provenance`)."""

from oml_core.io.embeddings_files import (
    FORMATS,
    EmbeddingsFile,
    EmbeddingsFileError,
    EmbeddingsWriter,
    check_format_available,
    check_writable,
    format_of,
    read_embeddings_file,
    written_files,
)
from oml_core.io.provenance import (
    EmbeddingsMismatchError,
    EmbeddingsProvenance,
    check_provenance,
    state_dict_sha256,
)

__all__ = [
    "FORMATS",
    "EmbeddingsFile",
    "EmbeddingsFileError",
    "EmbeddingsMismatchError",
    "EmbeddingsProvenance",
    "EmbeddingsWriter",
    "check_format_available",
    "check_provenance",
    "check_writable",
    "format_of",
    "read_embeddings_file",
    "state_dict_sha256",
    "written_files",
]

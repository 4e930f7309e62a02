"""Abstract interfaces (ABCs only) that components of every plugin implement."""

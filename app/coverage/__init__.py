"""Datasets as resources: file formats, streaming parsing, popularity (and, later, the API)."""

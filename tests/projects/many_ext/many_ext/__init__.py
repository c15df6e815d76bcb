"""Six small C extensions."""

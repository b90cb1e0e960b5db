"""The release number, written here once: the package, its wheel's metadata and every run's provenance read it."""

__version__ = "0.1.0"

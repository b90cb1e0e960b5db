"""Presets (YAML files and ``--set`` overrides) and how they are read, checked field by
field before any data or model is touched."""

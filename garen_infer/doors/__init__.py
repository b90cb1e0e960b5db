"""The doors: the command line, the Python API, the PyTerrier adapter and the demo. Each parses its
input and calls the runner; none holds logic of its own."""

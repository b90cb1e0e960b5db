"""Engine tests (run in .venv-vllm). A package, so its conftest never shadows tests/conftest.py as module `conftest`."""

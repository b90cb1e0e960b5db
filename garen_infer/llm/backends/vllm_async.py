"""vLLM's asynchronous engine (``AsyncLLM``) behind a plain call: requests are added to the running engine from any
thread while others decode, and each call waits for its own answers only, not for the longest of a batch.

The engine's event loop runs in a thread of its own; ``generate`` hands each prompt to it and blocks the caller
until those prompts are finished. The scheduler and the response cache's wrapper call it from one thread per
request in flight (``requests_at_once``: ``max_num_seqs`` of every data-parallel rank), so the engine's batch
is refilled as each
sequence ends, which is vLLM's continuous batching.
"""

from __future__ import annotations

import asyncio
import itertools
import threading


class AsyncEngine:
    def __init__(self, engine_kwargs: dict):
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.usage.usage_lib import UsageContext
        from vllm.v1.engine.async_llm import AsyncLLM

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="vllm-async", daemon=True)
        self._thread.start()

        async def build():  # made on its loop, where its output handler will run
            # vllm.LLM's context: without one the engine takes SchedulerConfig's fallbacks (128 sequences, 2,048
            # tokens a step) instead of the limits vLLM sizes for the GPU (vllm_limits.py)
            return AsyncLLM.from_engine_args(AsyncEngineArgs(**engine_kwargs), usage_context=UsageContext.LLM_CLASS)

        self.engine = self._on_loop(build())
        self._ids = itertools.count()

    @property
    def vllm_config(self):
        """The configuration the engine started with (its KV cache blocks summed over data-parallel ranks)."""
        return self.engine.vllm_config

    def generate(self, prompts: list[dict], params, lora_request=None) -> list:
        """The finished ``RequestOutput`` of each prompt, in order; all of them are in the engine at once."""
        futures = [
            asyncio.run_coroutine_threadsafe(self._finished(p, params, lora_request), self._loop)
            for p in prompts
        ]
        return [f.result() for f in futures]

    async def _finished(self, prompt: dict, params, lora_request):
        final = None
        async for output in self.engine.generate(prompt, params, f"garen-{next(self._ids)}", lora_request=lora_request):
            final = output  # cumulative: the last one holds the whole answer
        return final

    def _on_loop(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def shutdown(self) -> None:
        """Stop the engine, then its loop once the engine's own tasks have ended."""
        try:
            self.engine.shutdown()
            self._on_loop(_cancel_the_rest())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)


async def _cancel_the_rest() -> None:
    tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)

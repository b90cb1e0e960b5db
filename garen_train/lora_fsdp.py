"""FSDP for the LoRA jobs: ``trainer.strategy: {class_path: garen_train.lora_fsdp.LoRAFSDPStrategy}``.

FSDP flattens the parameters of each of its units into one tensor, so a unit holds one dtype. A LoRA job has a
frozen base in bf16 and trainable adapters in fp32; Lightning's plain ``fsdp`` puts both in one unit and torch
refuses ("Must flatten tensors with uniform dtype"), and without a wrap policy one unit holding the whole model
would save no memory anyway. The policy here is peft's: each trainable leaf (a LoRA A or B matrix) is a unit of its
own, each decoder layer (the model's ``_no_split_modules``, e.g. Qwen3DecoderLayer) is one, and the root keeps the
rest (embeddings, final norm, head), so every unit is uniform and a layer's full weights exist only while it runs.
``use_orig_params`` stays on: LoRA layers hold frozen and trainable parameters side by side.

Checked on CPU (gloo): the policy's units and a training step (tests/train/test_train_distributed.py); a two-process CPU
run trains, but CPU FSDP crashed while gathering the full checkpoint, and it has not run on GPUs yet.
"""

from __future__ import annotations

from lightning.pytorch.strategies import FSDPStrategy
from lightning.pytorch.utilities.rank_zero import rank_zero_info

from garen_infer.errors import GarenError


def lora_wrap_policy(net):
    """FSDP's auto-wrap policy for a peft model: its trainable leaves and its decoder layers become units."""
    from peft.utils.other import fsdp_auto_wrap_policy

    if not hasattr(net, "peft_config"):
        raise GarenError("LoRAFSDPStrategy shards LoRA jobs (a module whose .net is a peft model), not a "
                         f"{type(net).__name__}")
    return fsdp_auto_wrap_policy(net)


class LoRAFSDPStrategy(FSDPStrategy):
    strategy_name = "lora_fsdp"

    def __init__(self, sharding_strategy: str = "FULL_SHARD", state_dict_type: str = "full", **kwargs):
        kwargs.setdefault("use_orig_params", True)
        # the CLI hands over names as str, which FSDPStrategy checks; its annotations name the Literals
        super().__init__(sharding_strategy=sharding_strategy,  # type: ignore[arg-type]
                         state_dict_type=state_dict_type, **kwargs)  # type: ignore[arg-type]

    def _setup_model(self, model):
        from torch.distributed.fsdp import FullyShardedDataParallel

        net = getattr(model, "net", model)
        if self.world_size == 1:  # nothing to shard, and torch's unsharded mode breaks on tied embeddings
            raise GarenError("LoRAFSDPStrategy shards a model across several processes; on one device use "
                             "the default strategy")
        device = self.root_device  # Lightning passes the CUDA index; the CPU (gloo, for tests) must be named
        wrapped = FullyShardedDataParallel(
            module=model, cpu_offload=self.cpu_offload, mixed_precision=self.mixed_precision_config,
            sharding_strategy=self.sharding_strategy, device_id=device.index if device.type == "cuda" else device,
            auto_wrap_policy=lora_wrap_policy(net), **self.kwargs,
        )
        wrapped = super()._setup_model(wrapped)  # Lightning's remaining set-up of an already wrapped model
        units = [m for m in wrapped.modules() if isinstance(m, FullyShardedDataParallel)]
        layers = sum(type(u.module).__name__ in net._no_split_modules for u in units)
        rank_zero_info(f"[fsdp] {len(units)} units: {layers} decoder layers, {len(units) - layers - 1} "
                       "adapter matrices, the root")
        return wrapped

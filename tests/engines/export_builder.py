"""The export test_export_engines.py scores, built in a process of its own: the training module (the Gemma
checkpoint in fp32 with its LoRA, and the merged copy the export writes) is memory the test process never holds,
and all of it goes back to the machine when this process ends.

    python tests/engines/export_builder.py MODEL_DIR OUT PAIRS_JSON DTYPE

writes the export to OUT and the module's own P(yes) on PAIRS (a JSON list of [query, document]) to OUT.json.
LoRA weights are seeded random values instead of trained ones, which would cost minutes on CPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def build(model_dir: str, out: Path, pairs: list[list[str]], dtype: str) -> list[float]:
    import torch

    from garen_train.scorers.causal_lm import YesNoLoRAScorer

    module = YesNoLoRAScorer(model=model_dir, max_length=1024, lora_r=8, lora_alpha=16, lora_dropout=0.0,
                             target_modules=["q_proj", "v_proj"])
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in module.net.named_parameters():
            if "lora_" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.03)
    module.eval()
    with torch.no_grad():
        expected = torch.sigmoid(module.relevance_logits([q for q, _ in pairs], [d for _, d in pairs])).tolist()
    module.export(argparse.Namespace(out=str(out), formats=["adapter", "merged"], dtype=dtype))
    return expected


if __name__ == "__main__":
    model_dir, out, pairs, dtype = sys.argv[1:5]
    out = Path(out)
    expected = build(model_dir, out, json.loads(pairs), dtype)
    out.with_suffix(".json").write_text(json.dumps(expected), encoding="utf-8")

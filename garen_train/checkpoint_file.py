"""Reading a checkpoint without running code from it.

A ``.ckpt`` is a pickle, and unpickling an arbitrary pickle runs whatever callables it names. Every checkpoint
is therefore read with torch's weights-only unpickler, which builds nothing but containers, numbers, strings and
tensors, and then checked against the types garen-train's jobs save (``SAVED_TYPES``): Lightning's bookkeeping
(epoch, loops, callback, optimiser and scheduler states), the hyper-parameters LightningCLI records (plain values
and dicts), the weights, and each job's own entries (``garen``: validation figures and data description,
``partition``: its source and history). Anything else is refused with one line; a user who trusts whoever wrote
the file may pass ``--trust-checkpoint`` (``garen-train export``) to unpickle it in full.
"""

from __future__ import annotations

import pickle
import re
from collections import OrderedDict
from pathlib import Path

import torch

from garen_infer.errors import GarenError

SAVED_TYPES = frozenset({dict, OrderedDict, list, tuple, str, bytes, int, float, bool, type(None),
                         torch.Tensor, torch.nn.Parameter, torch.Size, torch.dtype, torch.device})
TRUST_OPTION = "--trust-checkpoint"


class UntrustedCheckpoint(GarenError):
    """A checkpoint that holds something other than what garen-train's jobs save."""

    def __init__(self, path: Path, what: str, offer_trust: bool = True):
        trust = f"; pass {TRUST_OPTION} only if you trust whoever wrote this file" if offer_trust else ""
        super().__init__(f"{path}: refused to load: it holds {what}, which garen-train's jobs never save and which "
                         f"could run code when unpickled{trust}")


def read_checkpoint(path: str | Path, trust: bool = False, mmap: bool = False, offer_trust: bool = True) -> dict:
    """The checkpoint at ``path`` as a dict (tensors on CPU), read without running code unless ``trust``;
    ``offer_trust``: the refusal names the option that trusts the file (the commands that have it)."""
    path = Path(path)
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=not trust, mmap=mmap)
    except pickle.UnpicklingError as err:
        raise refusal(path, err, offer_trust) from None
    except (RuntimeError, EOFError, ValueError) as err:  # not a torch file at all, or a truncated one
        raise GarenError(f"{path}: not a checkpoint written by 'garen-train fit' ({err})") from None
    if not isinstance(checkpoint, dict):
        raise GarenError(f"{path}: not a checkpoint written by 'garen-train fit' (it holds a "
                         f"{type(checkpoint).__name__})")
    if not trust:
        check_saved_types(path, checkpoint, offer_trust=offer_trust)
    return checkpoint


def refusal(path: Path, err: pickle.UnpicklingError, offer_trust: bool = True) -> GarenError:
    """One line for what torch's weights-only unpickler would not read: a callable it names, or no checkpoint."""
    named = re.search(r"GLOBAL ([\w.]+)", str(err))
    if named:
        return UntrustedCheckpoint(path, f"'{named.group(1)}'", offer_trust)
    return GarenError(f"{path}: not a checkpoint written by 'garen-train fit' (torch's weights-only loader "
                      "cannot read it)")


def check_saved_types(path: Path, value, where: str = "checkpoint", offer_trust: bool = True) -> None:
    """Refuse any value, however deep, whose type is not one of ``SAVED_TYPES``."""
    if type(value) not in SAVED_TYPES:  # exact types: a subclass could carry behaviour of its own
        raise UntrustedCheckpoint(path, f"a {type(value).__module__}.{type(value).__qualname__} at {where}",
                                  offer_trust)
    items = value.items() if isinstance(value, dict) else enumerate(value) if type(value) in (list, tuple) else ()
    for key, item in items:
        check_saved_types(path, key, f"{where} (a key)", offer_trust)
        check_saved_types(path, item, f"{where}[{key!r}]", offer_trust)

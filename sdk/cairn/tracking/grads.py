"""Optional PyTorch helper: gradient norms per layer.

    loss.backward()
    cairn.tracking.grads.log_grad_norms(model, step=step)

Works on anything with `named_parameters()` whose parameters carry `.grad` tensors (L2 norms
via `.norm(2)`); it never imports torch itself, so `import cairn` stays light.
"""
from __future__ import annotations

import math
from typing import Any


def grad_norms(model: Any, *, prefix: str = "grad_norm/") -> dict[str, float]:
    """{prefix + parameter name: L2 norm of its gradient, ..., prefix + "total": global L2 norm}."""
    norms: dict[str, float] = {}
    total = 0.0
    for name, parameter in model.named_parameters():
        grad = getattr(parameter, "grad", None)
        if grad is None:
            continue
        norm = float(grad.detach().norm(2).item())
        norms[prefix + name] = norm
        total += norm * norm
    if norms:
        norms[prefix + "total"] = math.sqrt(total)
    return norms


def log_grad_norms(model: Any, *, step: int | None = None, run=None, prefix: str = "grad_norm/") -> dict[str, float]:
    from cairn import tracking

    norms = grad_norms(model, prefix=prefix)
    target = run or tracking.current_run()
    if target is not None and norms:
        target.log(norms, step=step)
    return norms

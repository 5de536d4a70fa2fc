"""Whether one micro-batch of a CUDA run makes an activation too large to index with 32 bits."""
from __future__ import annotations

from typing import Any

__all__ = ["INDEX_LIMIT", "widest_activation", "index_limit_warning"]

#: elements one tensor may hold before a 32-bit index overflows
INDEX_LIMIT = 2 ** 31


def widest_activation(model: Any, width: int, samples: int) -> int | None:
    """Elements of the widest GPT activation: samples × seq_len × max(ffn_ratio·width, vocab)."""
    if getattr(model, "family", None) != "gpt":
        return None
    per_token = max(int(model.ffn_ratio) * int(width), int(model.vocab))
    return int(samples) * int(model.seq_len) * per_token


def index_limit_warning(model: Any, width: int, batch_size: int,
                        micro_batches: int) -> str | None:
    """The warning for a CUDA micro-batch reaching :data:`INDEX_LIMIT` (with a safe
    ``train.micro_batches``); None when it stays under or the shapes are unknown."""
    widest = widest_activation(model, width, batch_size // max(int(micro_batches), 1))
    if widest is None or widest < INDEX_LIMIT:
        return None
    fits = next((k for k in range(1, batch_size + 1) if batch_size % k == 0
                 and widest_activation(model, width, batch_size // k) < INDEX_LIMIT), None)
    advice = (f"set train.micro_batches to {fits} or more (a divisor of the batch)"
              if fits else "no micro-batch count fits: fewer tokens per sample "
                           "(model.seq_len) or a narrower model")
    return (f"width {width}, {batch_size} samples a step per worker (train.batch_size) ÷ "
            f"train.micro_batches {micro_batches}, model.seq_len {model.seq_len}, "
            f"model.ffn_ratio {model.ffn_ratio}, model.vocab {model.vocab}: one micro-batch "
            f"makes an activation of {widest:.3g} elements, at or past 2^31; on CUDA, PyTorch 2.11 "
            f"trained such a step to NaN on an H200 (32-bit indexing the likely cause), and "
            f"the run would stop as diverged at its first step — {advice}")

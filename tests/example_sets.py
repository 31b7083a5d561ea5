"""Which shipped examples the fast tests schedule, and on which hardware (one definition for
every test that walks ``examples/``)."""

from __future__ import annotations

#: whole-chip 4096³ GEMMs (about 167K to 334K ops): only the slow tests and benchmarks run them
WHOLE_CHIP = {"matmul_gelu", "matmul_gelu_unfused", "matmul_gelu_l1reuse"}
#: examples of tens of thousands of ops: slow tests (-m slow)
LARGE = {"attention", "attention_tail", "ffn_layernorm"}


def hw_for(stem: str) -> str:
    """The preset an example is written for: ``*_hbm`` examples follow the seed's 1 TB/s."""
    if stem == "double_buffer":
        return "double-buffer-demo"
    if stem.startswith("split_"):
        return "ascend-a2"  # micro-ops placed on the split chip's AIC and AIV cores
    return "seed-davinci-hbm" if stem.endswith("_hbm") else "seed-davinci"

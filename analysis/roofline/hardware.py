"""A device as the roofline sees it (memory bandwidth and matmul throughput) and the time
a phase cannot beat on it: max(bytes / bandwidth, FLOPs / throughput)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .accounting import PhaseCost, decode_cost, prefill_cost
from .model_config import ModelShape


@dataclass(frozen=True)
class Hardware:
    name: str
    memory_bytes_per_s: float  # peak (or the user's) memory bandwidth
    flops_per_s: float  # peak dense throughput in the model's dtype (or the user's)
    kind: str = "gpu"  # gpu | cpu
    memory_name: str = "HBM"  # what the bandwidth is of, for sentences: HBM, GDDR6, DRAM
    source: str = ""  # where the figures come from
    capacity_bytes: int | None = None  # the device's memory size as its sheet states it (GPU table), None unknown

    def __post_init__(self) -> None:
        if not (self.memory_bytes_per_s > 0 and self.flops_per_s > 0):
            raise ValueError("memory bandwidth and throughput must both be positive")

    def scaled(self, memory_fraction: float = 1.0, flops_fraction: float = 1.0) -> Hardware:
        """The share of the peak a real kernel can reach (the UI's achievable fractions)."""
        if not (0 < memory_fraction <= 1 and 0 < flops_fraction <= 1):
            raise ValueError("achievable fractions must lie in (0, 1]")
        if memory_fraction == 1 and flops_fraction == 1:
            return self
        return replace(
            self,
            memory_bytes_per_s=self.memory_bytes_per_s * memory_fraction,
            flops_per_s=self.flops_per_s * flops_fraction,
            source=f"{self.source} x {memory_fraction:g} memory, x {flops_fraction:g} compute".strip(),
        )

    @property
    def ridge_flops_per_byte(self) -> float:
        """Arithmetic intensity above which a kernel is compute bound."""
        return self.flops_per_s / self.memory_bytes_per_s


@dataclass(frozen=True)
class Estimate:
    cost: PhaseCost
    memory_ms: float
    compute_ms: float

    @property
    def expected_ms(self) -> float:
        return max(self.memory_ms, self.compute_ms)

    @property
    def bound(self) -> str:
        """The binding resource: "memory" or "compute"."""
        return "compute" if self.compute_ms > self.memory_ms else "memory"


def estimate(cost: PhaseCost, hardware: Hardware) -> Estimate:
    return Estimate(
        cost=cost,
        memory_ms=1e3 * cost.bytes / hardware.memory_bytes_per_s,
        compute_ms=1e3 * cost.flops / hardware.flops_per_s,
    )


def compute_bound_prompt_tokens(
    shape: ModelShape, hardware: Hardware, batch: int = 1, limit: int = 1 << 22
) -> int | None:
    """Shortest prompt whose prefill is compute bound (FLOPs / throughput >= bytes / bandwidth);
    None if none up to `limit`. FLOPs grow faster with the prompt than bytes do, so the sign of
    the difference changes once: a doubling search, then bisection."""

    def compute_bound(n: int) -> bool:
        e = estimate(prefill_cost(shape, n, batch), hardware)
        return e.compute_ms >= e.memory_ms

    if compute_bound(1):
        return 1
    hi = 2
    while not compute_bound(hi):
        if hi >= limit:
            return None
        hi *= 2
    lo = hi // 2  # memory bound at lo, compute bound at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if compute_bound(mid) else (mid, hi)
    return hi


def phase_estimates(shape: ModelShape, hardware: Hardware, prompt_tokens: int, batch: int = 1) -> dict[str, Estimate]:
    """The CLI's two phases: the prefill of the prompt and the first decode step after it."""
    return {
        "prefill": estimate(prefill_cost(shape, prompt_tokens, batch), hardware),
        "decode": estimate(decode_cost(shape, prompt_tokens, batch), hardware),
    }

"""Links a KV cache crosses between a prefill and a decode replica (disaggregated serving).

A transfer of ``B`` bytes over a link takes ``latency_s + B / bandwidth`` seconds once the
link is free (simulator/fleet/disagg_links.py queues transfers on it). ``bandwidth_gbps``
is GB/s (1e9 bytes/s) in ONE direction, per GPU: a KV transfer goes one way, and each GPU
of a tensor-parallel replica sends its own shard over its own link (NIC or NVLink port).
Vendors quote NVLink and PCIe with both directions added and networks in Gb/s per port;
the figures below are converted, each with its source. ``latency_s`` is the fixed cost
of one transfer (the fabric's one-way small-message latency as published); a transfer
engine's own handshake (NIXL, Mooncake) comes on top and is not modelled.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from simulator.errors import ConfigError


@dataclass(frozen=True, slots=True)
class LinkSpec:
    """One kind of link: bandwidth per GPU in one direction and a per-transfer latency."""

    name: str  # catalogue key
    bandwidth_gbps: float  # GB/s (1e9 bytes/s), one direction, per GPU; inf: instant
    latency_s: float  # fixed seconds per transfer
    source: str = ""  # where the figures come from

    def __post_init__(self) -> None:
        if not (self.bandwidth_gbps > 0):
            raise ConfigError(f"link {self.name}: bandwidth_gbps = {self.bandwidth_gbps!r}: "
                              "must be > 0")
        if not (self.latency_s >= 0 and math.isfinite(self.latency_s)):
            raise ConfigError(f"link {self.name}: latency_s = {self.latency_s!r}: must be a "
                              "finite number >= 0")

    def transfer_s(self, num_bytes: float, lanes: int = 1) -> float:
        """Seconds to move ``num_bytes`` over ``lanes`` such links in parallel, once free."""
        return self.latency_s + num_bytes / (self.bandwidth_gbps * 1e9 * lanes)


LINKS: Mapping[str, LinkSpec] = MappingProxyType({
    # NVLink 4 (H100 SXM): 900 GB/s per GPU, both directions added (NVIDIA H100 Tensor
    # Core GPU datasheet, "NVLink: 900GB/s"); NVSwitch adds ~1 us one-way (NVIDIA
    # NVLink/NVSwitch overview: sub-microsecond switch hops), rounded up to 2 us.
    "nvlink4": LinkSpec("nvlink4", 450.0, 2e-6,
                        "H100 SXM datasheet: 900 GB/s bidirectional per GPU"),
    # NVLink 3 (A100 SXM): 600 GB/s both directions (NVIDIA A100 datasheet).
    "nvlink3": LinkSpec("nvlink3", 300.0, 2e-6,
                        "A100 datasheet: 600 GB/s bidirectional per GPU"),
    # InfiniBand NDR: 400 Gb/s per port = 50 GB/s, one ConnectX-7 per GPU as in a DGX H100
    # (NVIDIA ConnectX-7 datasheet: "up to 400Gb/s"; DGX H100 user guide: 8 x 400 Gb/s);
    # ~5 us: RDMA write latency across one Quantum-2 switch, end to end (NVIDIA Quantum-2
    # datasheet: switch port-to-port latency ~130 ns; RDMA perftest small-message
    # latencies are 1-5 us on such fabrics).
    "infiniband-ndr": LinkSpec("infiniband-ndr", 50.0, 5e-6,
                               "ConnectX-7 datasheet: 400 Gb/s per port, one per GPU"),
    # InfiniBand HDR: 200 Gb/s = 25 GB/s (ConnectX-6 datasheet; DGX A100: 8 x 200 Gb/s).
    "infiniband-hdr": LinkSpec("infiniband-hdr", 25.0, 5e-6,
                               "ConnectX-6 datasheet: 200 Gb/s per port, one per GPU"),
    # PCIe x16: Gen4 16 GT/s x 16 lanes x 128/130 / 8 = 31.5 GB/s per direction, Gen5
    # 32 GT/s: 63.0 GB/s (PCI-SIG PCIe 4.0 / 5.0 base specifications); a host round trip
    # through system memory, so a few us per transfer (the DMA setup), taken as 10 us.
    "pcie-gen4": LinkSpec("pcie-gen4", 31.5, 10e-6, "PCIe 4.0 x16: 16 GT/s x 16, 128b/130b"),
    "pcie-gen5": LinkSpec("pcie-gen5", 63.0, 10e-6, "PCIe 5.0 x16: 32 GT/s x 16, 128b/130b"),
    # Ethernet (RoCE v2): line rate / 8 (IEEE 802.3ba 100GbE, 802.3cd 200GbE, 802.3bs
    # 400GbE); RDMA over Converged Ethernet one-way latency ~10 us through a datacentre
    # switch (typical RoCE perftest figures; higher than InfiniBand's).
    "ethernet-100g": LinkSpec("ethernet-100g", 12.5, 10e-6, "IEEE 802.3ba: 100 Gb/s"),
    "ethernet-200g": LinkSpec("ethernet-200g", 25.0, 10e-6, "IEEE 802.3cd: 200 Gb/s"),
    "ethernet-400g": LinkSpec("ethernet-400g", 50.0, 10e-6, "IEEE 802.3bs: 400 Gb/s"),
    # No link at all: the limit where a transfer is free and instant (tests, bounds).
    "ideal": LinkSpec("ideal", math.inf, 0.0, "a bound: no transfer cost"),
})


def get_link(name: str, where: str = "link") -> LinkSpec:
    """The catalogue's link called ``name`` (case-insensitive), or ConfigError listing them."""
    key = str(name).strip().lower()
    if key not in LINKS:
        raise ConfigError(f"{where} = {name!r}: not a known link; known: {sorted(LINKS)}")
    return LINKS[key]

"""The device memory plan of one proving key: what stays resident, how large each MSM batch is, and
the most a proof may hold at once. Pure arithmetic (no CuPy), so it is tested for every card size
on any machine; docs/memory.md explains the model.

Two modes:

* resident: the five base vectors stay on the device and a proof runs as on a large card (every
  MSM in one batch, the witness uploaded during H, B's G2 MSM beside the G1 ones). Chosen whenever
  the key and that proof's working memory fit together.
* streaming: MSMs run in batches of `batch` scalars whose working memory fits, each batch with its
  own 0/1 split and the batches' other scalars merged into MSMs of half a batch; the witness goes up
  after H, once a, b, c are freed. Base vectors that do not fit stay in pinned host memory in device
  form, and their batches go up on a copy stream into two device buffers in turn while the batch
  before computes, the next vector's first batch during this vector's last.

Which vectors stay resident in streaming mode follows what streaming a vector costs: bytes over
the link against the MSM work they overlap. The H and B_G2 MSMs do enough work per base that their
uploads hide behind it; A, B_G1 and L have mostly 0/1 scalars, so little work per base: streamed,
they wait on the link. Among the plans that fit, `plan_device` takes the one with the least
estimated device time: each MSM's work (`NS_PER_POINT`), the H MSM's grown by its batch's overhead
(`BATCH_OVERHEAD`, from the G1 MSM's time per point at each size) and its tree groups'
(`TREE_OVERHEAD`), and for a streamed vector the part of its upload (`LINK_BYTES_PER_S`) that its
MSM does not hide. Each constant names the record it comes from.

A key proven from a compiled circuit (`Products`) also weighs where its a, b, c are computed. On the
device they need room for the witness, a, b, c and one matrix at once beside the resident bases,
and the matrices go up for each proof. On the host they are computed in the device process, into
the key's one pinned staging buffer, and go up with the device held: the next partition's products
start only once this one's have left the buffer, so the partitions come no faster than the host
products and that transfer (`HOST_PRODUCTS_NS_PER_ROW`). Keeping vectors resident where that leaves
no room for the products can cost more than it saves, which is why the two are weighed together
(benchmarks/results/porep-e2e-cuda-32g-caps-h200-2026-12-04d.json; docs/memory.md, section 6).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from cuzk.backends.cuda.msm import TREE_GROUP_BYTES, working_bytes
from cuzk.errors import CuzkError

GIB = 1 << 30
FR_BYTES = 32
POINT_BYTES = {"g1": 96, "g2": 192}  #: one affine base in device form
QUERIES = (("h", "g1"), ("l", "g1"), ("a", "g1"), ("b_g1", "g1"), ("b_g2", "g2"))
#: Streaming mode keeps vectors resident in this order (module docstring).
RESIDENT_ORDER = ("a", "b_g1", "l", "b_g2", "h")
#: Streaming mode's MSM batches, largest first.
BATCHES = tuple(1 << k for k in range(27, 17, -1))
#: Device ns per base of each MSM of a PoRep-32GiB partition on an H200 (its measured MSM times
#: over its vectors' lengths: benchmarks/results/cuda-partition-h200-2026-12-07.json).
NS_PER_POINT = {"h": 6.0, "l": 1.2, "a": 0.6, "b_g1": 0.9, "b_g2": 6.8}
#: Extra time per point of a G1 MSM batch of 2^k scalars against one of 2^27 (resident, H200:
#: benchmarks/results/cuda-h200-2026-12-01e.json; odd sizes interpolated).
BATCH_OVERHEAD = {27: 0.0, 26: 0.02, 25: 0.05, 24: 0.095, 23: 0.13, 22: 0.166, 21: 0.35, 20: 0.62, 19: 1.0, 18: 1.5}
#: Extra time of the H MSM in batches whose tree rounds run in window groups of these bytes, against
#: groups of 1.5 GiB or more: fewer rounds run per group, which leaves more to the serial accumulation
#: (H200, the synthetic partition at 16 GiB, side by side: H 1,356 ms in batches of 2^24 with 768 MiB
#: groups, 1,141 in 2^23 with 1.5 GiB, 1,094 in 2^22 with 6 GiB;
#: benchmarks/results/cuda-capped-16g-plans-h200-2026-12-03.json). 384 MiB is not measured and taken as
#: 768 MiB's: smaller groups are not faster.
TREE_OVERHEAD = {3 << 28: 0.33, 3 << 27: 0.33, 3 << 26: 0.33}
#: Host-to-device bytes per second from pinned memory that the estimate assumes (PCIe 5 x16).
LINK_BYTES_PER_S = 40e9
#: Host ns per row of a compiled circuit's a, b, c and their check in the device process, beside a
#: PoRep stream's synthesis (H200 host, 16 cores: PoRep-32GiB's 130.3M rows in 2,356 ms p50;
#: benchmarks/results/porep-e2e-cuda-32g-cap32GiB-h200-2026-12-04d.json).
HOST_PRODUCTS_NS_PER_ROW = 18.0
#: Tree-round group sizes tried for each batch, largest first (smaller groups: more launches).
TREE_BYTES = (TREE_GROUP_BYTES, 3 << 29, 3 << 28, 3 << 27, 3 << 26)
#: Device memory a cap leaves to the CUDA context, the loaded kernel modules and the driver's own
#: allocations, which CuPy's pool does not see.
CONTEXT_BYTES = 768 << 20
#: Slack per phase for the small arrays (twiddles, offsets, window sums) that the estimates omit.
PHASE_SLACK = 128 << 20


class DeviceTooSmallError(CuzkError):
    """A key cannot be proven within the device memory cuzk may plan with."""


@dataclass(frozen=True)
class KeyShape:
    """What the plan needs of a proving key: its domain and the lengths of its vectors."""

    domain: int
    inputs: int
    aux: int
    h: int
    l: int
    a: int
    b_g1: int
    b_g2: int

    @classmethod
    def of(cls, pk: object) -> KeyShape:
        return cls(domain=pk.domain_size, inputs=len(pk.vk.ic), aux=len(pk.l),  # type: ignore[attr-defined]
                   **{name: len(getattr(pk, name)) for name, _ in QUERIES})

    def length(self, name: str) -> int:
        return getattr(self, name)

    def base_bytes(self, name: str) -> int:
        return self.length(name) * POINT_BYTES[dict(QUERIES)[name]]

    @property
    def key_bytes(self) -> int:
        return sum(self.base_bytes(name) for name, _ in QUERIES)

    @property
    def witness_bytes(self) -> int:
        """Inputs and aux as field elements, plus the A and B density masks (a byte each)."""
        return FR_BYTES * (self.inputs + self.aux) + 2 * self.aux + self.inputs


def resident_reserve(shape: KeyShape) -> int:
    """A proof's working memory in resident mode: a, b, c, the witness scalars and masks, one G1 and
    one G2 MSM's buffers at full size (B's G2 MSM runs beside the G1 ones)."""
    m = shape.domain
    scalars = FR_BYTES * (3 * m + shape.l + shape.a + shape.b_g1) + 2 * shape.l
    largest = max(shape.h, shape.l, shape.a, shape.b_g1, 1)
    return scalars + working_bytes("g1", largest) + working_bytes("g2", max(shape.b_g2, 1))


def _split_bytes(n: int) -> int:
    """One batch's 0/1 split: flags, the comparison, the int64 and the u32 indices of the others (their
    scalars go straight into the merged tail, `MergedTails`)."""
    return n * (1 + 1 + 8 + 4)


def stream_rows(group: str, batch: int) -> int:
    """Bases of `group` per streamed batch: the stream's buffers hold `batch` G1 bases' bytes each, so
    a G2 batch has half as many (its MSM's size does not matter: a split MSM merges its batches' tails)."""
    return max(1, batch * POINT_BYTES["g1"] // POINT_BYTES[group])


def tail_capacity(batch: int) -> int:
    """Scalars of a split MSM's merged tail (`MergedTails`): half a batch, so that its buffers and its
    MSM's working memory take no more than one whole batch's MSM would."""
    return max(1, batch // 2)


#: The phases of a streaming-mode proof in the order they run.
PHASES = ("h", "msm_h", "select_b", "msm_l", "select_a", "msm_a", "msm_b_g1", "msm_b_g2")


def stream_buffers(shape: KeyShape, batch: int, streamed: frozenset[str]) -> int:
    """Bytes of the streamed bases' two buffers (`streaming.BaseStream`): each as large as the largest streamed
    batch; one when everything streamed is a single batch."""
    rows = {name: min(shape.length(name), stream_rows(group, batch)) for name, group in QUERIES
            if name in streamed and shape.length(name)}
    batches = sum(-(-shape.length(name) // r) for name, r in rows.items())
    largest = max((r * POINT_BYTES[dict(QUERIES)[name]] for name, r in rows.items()), default=0)
    return min(2, batches) * largest


def streaming_phases(shape: KeyShape, batch: int, tree_bytes: int, streamed: frozenset[str]) -> dict[str, int]:
    """Peak device bytes of each phase of a streaming-mode proof (the bases' residency aside)."""
    m, wit = shape.domain, shape.witness_bytes
    b_sc = FR_BYTES * shape.b_g1

    def msm(name: str, split: bool) -> int:
        group = dict(QUERIES)[name]
        n = max(shape.length(name), 1)
        k = min(stream_rows(group, batch) if name in streamed else batch, n)
        if not split:
            return working_bytes(group, k, tree_bytes)
        # A batch's split, the merged tail's scalars and bases (indices into resident bases), its MSM.
        cap = tail_capacity(k)
        tail = cap * (FR_BYTES + (POINT_BYTES[group] if name in streamed else 4))
        return _split_bytes(k) + tail + working_bytes(group, cap, tree_bytes)

    phases = {
        "h": 3 * FR_BYTES * m,
        "msm_h": FR_BYTES * m + wit + msm("h", split=False),
        "select_b": wit + b_sc + 8 * shape.b_g1,
        "msm_l": wit + b_sc + msm("l", split=True),
        # A's scalars are gathered per batch from the witness (`_BatchSelect`): u32 indices, made from
        # int64 ones.
        "select_a": wit + b_sc + 12 * shape.a,
        "msm_a": wit + b_sc + 4 * shape.a + FR_BYTES * min(batch, max(shape.a, 1)) + msm("a", split=True),
        "msm_b_g1": b_sc + msm("b_g1", split=True),
        "msm_b_g2": b_sc + msm("b_g2", split=True),
    }
    # The stream's buffers are held from the first streamed vector's MSM to the end of the proof.
    first = next((PHASES.index(f"msm_{name}") for name, _ in QUERIES if name in streamed), len(PHASES))
    bufs = stream_buffers(shape, batch, streamed)
    return {k: v + PHASE_SLACK + (bufs if PHASES.index(k) >= first else 0) for k, v in phases.items()}


@dataclass(frozen=True)
class Products:
    """A compiled circuit's a, b, c as a plan weighs them (module docstring): its rows, and the device
    bytes of its largest matrix and of all three."""

    rows: int
    largest_matrix: int
    matrices: int


@dataclass(frozen=True)
class DevicePlan:
    """How one key is proven on one device within `budget` bytes."""

    budget: int
    mode: str  #: "resident" or "streaming"
    resident: tuple[str, ...]  #: vectors kept on the device
    reserve: int  #: most bytes one proof holds at once besides the resident bases
    batch: int | None = None  #: scalars per MSM batch (None: each MSM in one batch)
    tree_bytes: int = TREE_GROUP_BYTES
    phases: dict[str, int] = field(default_factory=dict, compare=False)

    @property
    def streamed(self) -> tuple[str, ...]:
        return tuple(name for name, _ in QUERIES if name not in self.resident)

    def resident_bytes(self, shape: KeyShape) -> int:
        return sum(shape.base_bytes(v) for v in self.resident)

    def streamed_bytes(self, shape: KeyShape) -> int:
        """Bases that go over the link for each proof."""
        return sum(shape.base_bytes(v) for v in self.streamed)

    def smaller(self, shape: KeyShape) -> DevicePlan | None:
        """A plan that holds less at once (half the batch, or smaller tree groups), the same vectors
        resident: what a proof retries with after an out-of-memory error. None when none is smaller."""
        batch = self.batch if self.batch is not None else max(shape.h, shape.l, shape.a, shape.b_g1, 1)
        for b, t in ((batch, self.tree_bytes // 2), (batch // 2, self.tree_bytes // 2), (batch // 2, self.tree_bytes)):
            if b >= BATCHES[-1] and t >= TREE_BYTES[-1] and (b, t) != (batch, self.tree_bytes):
                return self.streaming_with(shape, b, t)
        return None

    def streaming_with(self, shape: KeyShape, batch: int, tree_bytes: int) -> DevicePlan:
        """This plan's resident vectors in streaming mode with these MSM batches and tree groups, its
        phases and reserve counted again (whether it fits the budget is the caller's question)."""
        phases = streaming_phases(shape, batch, tree_bytes, frozenset(self.streamed))
        return replace(self, mode="streaming", batch=batch, tree_bytes=tree_bytes, reserve=max(phases.values()),
                       phases=phases)


def minimum_bytes(shape: KeyShape) -> int:
    """The least device memory a streaming plan can prove this key in (nothing resident)."""
    everything = frozenset(name for name, _ in QUERIES)
    return max(streaming_phases(shape, BATCHES[-1], TREE_BYTES[-1], everything).values())


def plan_device(shape: KeyShape, budget: int, products: Products | None = None) -> DevicePlan:
    """The plan for proving `shape`'s key within `budget` bytes of device memory (module docstring),
    weighing where `products` (the compiled circuit proofs of the key compute, if known) run.
    Raises DeviceTooSmallError when even a streaming plan with nothing resident does not fit."""
    reserve = resident_reserve(shape)
    if shape.key_bytes + reserve <= budget:
        return DevicePlan(budget, "resident", tuple(name for name, _ in QUERIES), reserve)
    everything = frozenset(name for name, _ in QUERIES)
    # Resident bases may fill the budget, or leave the products their room on the device.
    rooms = [budget] if products is None else [budget, budget - products_bytes(shape, products.largest_matrix)]
    best: tuple[tuple[float, float], DevicePlan] | None = None
    for batch in BATCHES:
        for tree_bytes in TREE_BYTES:
            phases = streaming_phases(shape, batch, tree_bytes, everything)
            if max(phases.values()) > budget:
                continue
            for room in rooms:
                if room < 0:
                    continue
                plan = _keep_resident(shape, budget, room, batch, tree_bytes, phases)
                # A partition's pace, then (where the host products set it) the device's own time;
                # ties keep the earlier plan: the larger batch and tree groups.
                estimate = (estimated_seconds(shape, plan, products), estimated_seconds(shape, plan))
                if best is None or estimate < best[0]:
                    best = (estimate, plan)
            break  # smaller tree groups for this batch only matter when this one does not fit
    if best is not None:
        return best[1]
    raise DeviceTooSmallError(f"needs at least {format_gib(minimum_bytes(shape) + CONTEXT_BYTES)} of device memory")


def plan_beside(shape: KeyShape, budget: int, others: Sequence[tuple[int, int]],
                products: Products | None = None) -> DevicePlan:
    """`plan_device` for a key loaded beside keys already on the device, `others` their (resident
    bytes, reserve): their resident bases are held, and the largest reserve of all keys must still
    fit beside every key's resident bases (proofs of different keys take the device one at a time).
    What a device process plans (`residency.DeviceKeys.plan_key`) and `cuzk doctor` predicts."""
    budget -= sum(held for held, _ in others)
    other_reserve = max((reserve for _, reserve in others), default=0)
    room = budget
    while True:
        plan = plan_device(shape, room, products)
        over = plan.resident_bytes(shape) + other_reserve - budget
        if over <= 0:
            return plan
        # A smaller room may first cost the plan a smaller batch and keep its resident bases: lowered
        # until they leave the others' reserve its room (DeviceTooSmallError when nothing does).
        room -= over


def _keep_resident(shape: KeyShape, budget: int, room: int, batch: int, tree_bytes: int,
                   phases: dict[str, int]) -> DevicePlan:
    """A streaming plan keeping vectors resident in `RESIDENT_ORDER` while each phase fits beside them
    and they fit in `room`."""
    everything = frozenset(name for name, _ in QUERIES)
    resident: list[str] = []
    for name in RESIDENT_ORDER:
        trial = everything - {*resident, name}
        trial_phases = streaming_phases(shape, batch, tree_bytes, trial)
        kept = sum(shape.base_bytes(v) for v in (*resident, name))
        if kept + max(trial_phases.values()) <= budget and kept <= room:
            resident.append(name)
            phases = trial_phases
    order = tuple(name for name, _ in QUERIES if name in resident)
    return DevicePlan(budget, "streaming", order, max(phases.values()), batch, tree_bytes, phases)


def estimated_seconds(shape: KeyShape, plan: DevicePlan, products: Products | None = None) -> float:
    """A partition's time under `plan` by the module docstring's model (for choosing plans only): the
    MSMs' device time, and with `products` their cost where the plan puts them."""
    total = 0.0
    for name, _ in QUERIES:
        n = shape.length(name)
        batch = min(plan.batch or n, n) or 1
        # Split MSMs merge their batches' tails into MSMs of half a batch or more (`MergedTails`): only
        # the H MSM runs in batches.
        grow = 0.0
        if plan.batch and name == "h":
            grow = (BATCH_OVERHEAD.get(max(18, min(27, batch.bit_length() - 1)), 0.0)
                    + TREE_OVERHEAD.get(plan.tree_bytes, 0.0))
        compute = NS_PER_POINT[name] * 1e-9 * n * (1 + grow)
        link = shape.base_bytes(name) / LINK_BYTES_PER_S if name not in plan.resident else 0.0
        total += max(compute, link)
    if products is None:
        return total
    if products_fit(plan, shape, products.largest_matrix):
        return total + products.matrices / LINK_BYTES_PER_S
    abc = 3 * FR_BYTES * products.rows / LINK_BYTES_PER_S
    return max(total + abc, HOST_PRODUCTS_NS_PER_ROW * 1e-9 * products.rows + abc)


def products_bytes(shape: KeyShape, largest_matrix: int) -> int:
    """Device bytes of a compiled circuit's products beside the resident bases: the witness, a, b, c
    and its largest matrix at once (matrices that are not resident go up one at a time), with what
    a row needs beside them: the upload's scan for long rows (a row length of up to 8 bytes and a
    flag) and the a·b = c check's flag."""
    return shape.witness_bytes + (3 * FR_BYTES + 8 + 1 + 1) * shape.domain + largest_matrix + PHASE_SLACK


def products_fit(plan: DevicePlan, shape: KeyShape, largest_matrix: int) -> bool:
    """Whether a compiled circuit's a, b, c can be computed on the device beside the resident bases
    (`products_bytes`). Resident mode's reserve already holds them."""
    if plan.mode == "resident":
        return True
    return plan.resident_bytes(shape) + products_bytes(shape, largest_matrix) <= plan.budget


def format_gib(nbytes: int) -> str:
    return f"{nbytes / GIB:.1f} GiB"

"""`cuzk circuit shape|list`: how big a circuit is, without proving anything.

`shape` gives one partition's rows, public inputs, aux variables and A/B densities, the partitions
of a proof, the evaluation domain, the official parameter file name and the vector lengths (and
size) its `.params` must have. Filecoin's production circuits reach 130M rows (porep-32g), so their
figures come by default from the table of exact shapes the engine sizes its memory with
(`cuzk.circuits.filecoin.shapes.KNOWN_SHAPES`: counted on the shape back end, the largest ones
extrapolated from smaller variants; its docstring says how they were checked). `--count`
synthesizes the blank circuit on the shape-counting back end instead and says whether the table
agrees. Test circuits have no table entry: they are counted, and those above
`COUNT_WITHOUT_FLAG_MAX_ROWS` rows only with `--count`. Every output says which source it used.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from cuzk.errors import CuzkError

if TYPE_CHECKING:  # the parser is built without importing the numeric layers; handlers import them
    from cuzk.groth16.formats.params_shape import ExpectedParamsLayout
    from cuzk.r1cs import CircuitShape

#: Largest test circuit counted without --count (about a second per 100k rows on one core).
COUNT_WITHOUT_FLAG_MAX_ROWS = 1 << 20
PROOF_BYTES_PER_PARTITION = 192
TABLE = "table"
COUNTED = "counted"


def register(sub: argparse._SubParsersAction) -> None:
    circuit = sub.add_parser("circuit", help="sizes and shapes of the circuits cuzk proves")
    csub = circuit.add_subparsers(dest="circuit_command", metavar="SUBCOMMAND", required=True)

    shape = csub.add_parser("shape", help="rows, inputs, aux, A/B densities, partitions, domain, parameter file",
                            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    shape.add_argument("circuit", help="circuit id: porep|winning|wpost|snap-2k|8m|512m|32g|64g, mimc-K, bits-N")
    shape.add_argument("--count", action="store_true",
                       help="synthesize the blank circuit on the shape back end instead of reading the table "
                            "(porep-32g: 130M rows, a long run)")
    shape.add_argument("--json", action="store_true", help="print JSON instead of a table")
    shape.set_defaults(handler=cmd_shape)

    listing = csub.add_parser("list", help="every circuit id, with its size from the table")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.set_defaults(handler=cmd_list)

    compile_ = csub.add_parser("compile", help="record circuits once into compiled files the daemon's synthesis "
                                               "uses (<param-cache>/compiled/; docs/compiled-circuits.md)")
    compile_.add_argument("circuits", nargs="+", metavar="CIRCUIT", help="circuit ids, e.g. winning-2k porep-2k")
    compile_.add_argument("--param-cache", required=True, type=Path, help="the daemon's srs.param_cache")
    compile_.set_defaults(handler=cmd_compile)

    compiled = csub.add_parser("compiled", help="the compiled circuits under <param-cache>/compiled/ and their state")
    compiled.add_argument("--param-cache", required=True, type=Path, help="the daemon's srs.param_cache")
    compiled.set_defaults(handler=cmd_compiled)


# -- shapes and where they come from ------------------------------------------------------------------

@dataclass(frozen=True)
class ShapeReport:
    """One circuit id's partition shape, its source, and what follows from it."""

    circuit_id: str
    description: str
    shape: CircuitShape
    source: str  #: TABLE or COUNTED
    count_seconds: float | None  #: synthesis time when counted
    table_shape: CircuitShape | None  #: the table's entry for this id, if it has one
    partitions: int | None  #: partitions of one proof; None when it depends on the request (WindowPoSt)
    partitions_note: str
    params_file: str | None  #: official `v28-….params` name (Filecoin ids)

    @property
    def expected_layout(self) -> ExpectedParamsLayout:
        from cuzk.groth16.formats.params_shape import ExpectedParamsLayout

        return ExpectedParamsLayout.of_shape(self.shape)

    @property
    def table_agrees(self) -> bool | None:
        """When counted: whether the table holds the same shape (None: no table entry or not counted)."""
        if self.source != COUNTED or self.table_shape is None:
            return None
        return self.table_shape == self.shape

    def to_json(self) -> dict[str, Any]:
        s, layout = self.shape, self.expected_layout
        return {
            "circuit_id": self.circuit_id,
            "description": self.description,
            "source": self.source,
            "count_seconds": self.count_seconds,
            "table_agrees": self.table_agrees,
            "per_partition": {
                "constraints": s.num_constraints,
                "input_rows": s.num_inputs,
                "rows_without_input_rows": s.num_constraints - s.num_inputs,
                "public_inputs": s.num_inputs,
                "aux": s.num_aux,
                "a_density": {"inputs": s.a_input_density, "aux": s.a_aux_density, "total": s.a_query_len},
                "b_density": {"inputs": s.b_input_density, "aux": s.b_aux_density, "total": s.b_query_len},
            },
            "domain_size": layout.domain_size,
            "partitions": self.partitions,
            "partitions_note": self.partitions_note,
            "proof_bytes": None if self.partitions is None else self.partitions * PROOF_BYTES_PER_PARTITION,
            "params_file": self.params_file,
            "params_layout": {**layout.counts(), "params_bytes": layout.params_file_size,
                              "vk_bytes": layout.vk_file_size},
        }


def _partitions(circuit_id: str) -> tuple[int | None, str]:
    from cuzk.filecoin.sizes import CircuitKind, parse_circuit_id

    kind, size = parse_circuit_id(circuit_id)
    if kind is CircuitKind.POREP:
        return size.porep_partitions, (f"interactive and synthetic PoRep; NI-PoRep: {size.ni_partitions} "
                                       f"partitions of {size.ni_challenges} challenges")
    if kind is CircuitKind.WINNING:
        return 1, "one sector, 66 challenges"
    if kind is CircuitKind.WINDOW:
        return None, f"one partition per {size.window_post_sectors:,} sectors, one proof request per partition"
    return size.snap_partitions, f"{size.snap_challenges} challenges per partition"


def _count(circuit_id: str, blank: Any, *, console: Console | None,
           table: CircuitShape | None = None) -> tuple[CircuitShape, float]:
    from cuzk.groth16.synthesis import circuit_shape

    start = time.perf_counter()
    if console is None:
        shape = circuit_shape(blank)
    else:
        size = "" if table is None else f" ({table.num_constraints:,} rows in the table)"
        with console.status(f"counting {circuit_id} on the shape back end{size}"):
            shape = circuit_shape(blank)
    return shape, time.perf_counter() - start


def resolve_shape(circuit_id: str, *, count: bool = False, console: Console | None = None) -> ShapeReport:
    """The partition shape of `circuit_id`: from the table for Filecoin ids unless `count`; counted for
    test circuits (refused above COUNT_WITHOUT_FLAG_MAX_ROWS rows unless `count`)."""
    from cuzk.circuits.registry import lookup

    spec = lookup(circuit_id)
    if not spec.is_filecoin:
        blank = spec.blank()
        rows = getattr(blank, "num_constraints", None)
        if not count and (rows is None or rows > COUNT_WITHOUT_FLAG_MAX_ROWS):
            size = "an unknown number of" if rows is None else f"{rows:,}"
            raise CuzkError(f"{circuit_id} has {size} rows and no table entry; counting it synthesizes every row "
                            "(pass --count to do so)")
        shape, seconds = _count(circuit_id, blank, console=console)
        return ShapeReport(circuit_id, spec.description, shape, COUNTED, seconds, None, 1, "one circuit per proof",
                           None)

    from cuzk.circuits.filecoin.shapes import KNOWN_SHAPES

    table = KNOWN_SHAPES[circuit_id]
    partitions, note = _partitions(circuit_id)
    if count:
        shape, seconds = _count(circuit_id, spec.blank(), console=console, table=table)
        return ShapeReport(circuit_id, spec.description, shape, COUNTED, seconds, table, partitions, note,
                           spec.params_file_name)
    return ShapeReport(circuit_id, spec.description, table, TABLE, None, table, partitions, note,
                       spec.params_file_name)


def filecoin_circuit_ids() -> list[str]:
    from cuzk.filecoin.sizes import ALL_SIZES, CircuitKind, circuit_id

    return [circuit_id(kind, size) for kind in CircuitKind for size in ALL_SIZES]


def circuits_with_layout(found: dict[str, int]) -> list[str]:
    """Filecoin ids whose table shape gives exactly these `.params` lengths (ic, h, l, a, b_g1, b_g2):
    names the circuit a mislabelled file was made for."""
    return [cid for cid in filecoin_circuit_ids() if resolve_shape(cid).expected_layout.counts() == found]


def official_name_owner(file_name: str) -> str | None:
    """The Filecoin id whose official `v28-….params` name this is, if any."""
    from cuzk.circuits.registry import lookup

    return next((cid for cid in filecoin_circuit_ids() if lookup(cid).params_file_name == file_name), None)


def source_text(report: ShapeReport) -> str:
    if report.source == TABLE:
        return "table, KNOWN_SHAPES (--count synthesizes instead)"
    agrees = {None: "", True: ", the table agrees", False: ", DIFFERS from the table"}[report.table_agrees]
    return f"counted on the shape back end in {report.count_seconds:.1f} s{agrees}"


# -- commands ------------------------------------------------------------------------------------------

def _lines(rows: list[tuple[str, str]]) -> str:
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label:<{width}}  {value}" for label, value in rows)


def cmd_shape(args: argparse.Namespace) -> int:
    report = resolve_shape(args.circuit, count=args.count, console=None if args.json else Console(stderr=True))
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
        return 0
    s, layout = report.shape, report.expected_layout
    parts = "set by the request" if report.partitions is None else str(report.partitions)
    rows = [
        ("circuit", f"{report.circuit_id}: {report.description}"),
        ("source", source_text(report)),
        ("constraints", f"{s.num_constraints:,} per partition ({s.num_constraints - s.num_inputs:,} + "
                        f"{s.num_inputs:,} input rows)"),
        ("public inputs", f"{s.num_inputs:,} (ONE included)"),
        ("aux variables", f"{s.num_aux:,}"),
        ("A density", f"{s.a_query_len:,} ({s.a_input_density:,} inputs + {s.a_aux_density:,} aux)"),
        ("B density", f"{s.b_query_len:,} ({s.b_input_density:,} inputs + {s.b_aux_density:,} aux)"),
        ("domain size", f"{layout.domain_size:,} (2^{layout.domain_size.bit_length() - 1})"),
        ("partitions", f"{parts} ({report.partitions_note})"),
    ]
    if report.partitions is not None:
        rows.append(("proof bytes", f"{report.partitions * PROOF_BYTES_PER_PARTITION:,}"))
    if report.params_file:
        rows.append(("parameter file", report.params_file))
    rows.append((".params vectors", "  ".join(f"{name.upper()} {n:,}" for name, n in layout.counts().items())))
    rows.append((".params / .vk size", f"{layout.params_file_size:,} B / {layout.vk_file_size:,} B"))
    print(_lines(rows))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from cuzk.circuits.registry import lookup

    reports = [resolve_shape(cid) for cid in filecoin_circuit_ids()]
    tests = [{"pattern": "mimc-K", "description": lookup("mimc-3").description + " (3 <= K <= 27)"},
             {"pattern": "bits-N", "description": lookup("bits-1").description + " (1 <= N <= 2^20)"}]
    if args.json:
        rows = [{"circuit_id": r.circuit_id, "description": r.description, "source": r.source,
                 "constraints": r.shape.num_constraints, "public_inputs": r.shape.num_inputs,
                 "aux": r.shape.num_aux, "domain_size": r.expected_layout.domain_size,
                 "partitions": r.partitions, "params_file": r.params_file} for r in reports]
        print(json.dumps({"filecoin": rows, "test": tests}, indent=2))
        return 0
    print("Filecoin circuits: one partition each, sizes from the table (`cuzk circuit shape ID` for the rest)")
    print(f"{'id':<12} {'constraints':>13} {'inputs':>7} {'aux':>13} {'domain':>6} {'partitions':>10}  parameter file")
    for r in reports:
        parts = "per req." if r.partitions is None else str(r.partitions)
        print(f"{r.circuit_id:<12} {r.shape.num_constraints:>13,} {r.shape.num_inputs:>7,} {r.shape.num_aux:>13,} "
              f"{'2^' + str(r.expected_layout.domain_size.bit_length() - 1):>6} {parts:>10}  {r.params_file}")
    print("Test circuits:")
    for t in tests:
        print(f"{t['pattern']:<12} {t['description']}")
    return 0


# -- compiled circuits ---------------------------------------------------------------------------------

def cmd_compile(args: argparse.Namespace) -> int:
    """Blocking builds, one circuit after the other (each records the blank circuit in this process)."""
    from cuzk.circuits.filecoin.shapes import known_constraints
    from cuzk.engine.compiled_store import CompiledStore, record_in_parallel

    store = CompiledStore(args.param_cache / "compiled")
    for circuit_id in args.circuits:
        path = store.build(circuit_id, parallel=record_in_parallel(known_constraints(circuit_id)))
        print(f"{circuit_id}: {path}", flush=True)
    return 0


def cmd_compiled(args: argparse.Namespace) -> int:
    from cuzk.engine.compiled_store import CompiledStore

    print(json.dumps(CompiledStore(args.param_cache / "compiled").to_dict(), indent=2))
    return 0

"""The shapes of this code base's Filecoin circuits: sizes and densities, input rows included.

`KNOWN_SHAPES` holds every published circuit id's exact counts (docs/circuits.md §11): synthesized
directly for the small ones and extrapolated linearly from 1- and 2-challenge (PoRep), 1- and
2-sector (PoSt) and 1-, 2- and (d+1)-challenge (SnapDeals: d challenges per Poseidon digest, so the
last one adds a digest) variants for the large ones (extrapolation equals direct synthesis wherever
both were run). They reproduce every count published for rust-fil-proofs' circuits: PoRep 8MiB,
512MiB, 32GiB and 64GiB rows (3,844,929 / 4,423,433 / 130,278,541 / 131,185,849, each + the input
rows), WindowPoSt 32GiB / 64GiB (125,279,217 / 129,887,900), SnapDeals 32GiB (81,049,499)
(docs/circuits.md §6, §9, §10, §13), and porep-32g's aux count and A/B densities as the Rust daemon's
pre-compiled evaluator extracted them (130,169,893 aux, 129,753,292 / 33,112,281; docs/circuits.md §11).

The Filecoin providers size partitions and compiled-circuit builds from this table when the
parameter file is absent (`cuzk.providers.filecoin.provider.filecoin_circuit_shape`), and take its
constraint count when a `.params` header agrees with it.
"""

from __future__ import annotations

from cuzk.r1cs import CircuitShape

__all__ = ["KNOWN_SHAPES", "known_constraints"]


def _shape(inputs: int, aux: int, constraints: int, a_aux: int, b_aux: int) -> CircuitShape:
    """Every input reaches A (the input constraints), only ONE reaches B, in every Filecoin circuit."""
    return CircuitShape(num_inputs=inputs, num_aux=aux, num_constraints=constraints, a_input_density=inputs,
                        a_aux_density=a_aux, b_input_density=1, b_aux_density=b_aux)


#: Exact shapes (input constraints included) of this code base's Filecoin circuits; see the module
#: docstring for how they were obtained and checked.
KNOWN_SHAPES: dict[str, CircuitShape] = {
    "winning-2k": _shape(133, 91_674, 90_883, 69_300, 66_792),
    "winning-8m": _shape(133, 233_442, 230_803, 176_748, 169_488),
    "winning-512m": _shape(133, 304_326, 300_763, 230_472, 220_836),
    "winning-32g": _shape(133, 375_210, 370_723, 284_196, 272_184),
    "winning-64g": _shape(133, 396_000, 391_447, 299_838, 287_694),
    "wpost-2k": _shape(23, 22_128, 21_889, 16_770, 16_028),
    "wpost-8m": _shape(23, 65_088, 64_289, 49_330, 47_148),
    "wpost-512m": _shape(23, 86_568, 85_489, 65_610, 62_708),
    "wpost-32g": _shape(25_840, 126_902_376, 125_305_057, 96_179_805, 91_925_766),
    "wpost-64g": _shape(25_301, 131_500_200, 129_913_201, 99_624_500, 95_413_200),
    "porep-2k": _shape(40, 2_685_673, 2_687_961, 2_674_908, 685_521),
    "porep-8m": _shape(40, 3_842_449, 3_844_969, 3_814_996, 1_011_289),
    "porep-512m": _shape(40, 4_420_837, 4_423_473, 4_385_040, 1_174_173),
    "porep-32g": _shape(328, 130_169_893, 130_278_869, 129_753_292, 33_112_281),
    "porep-64g": _shape(328, 131_076_643, 131_186_177, 130_637_542, 33_386_943),
    "snap-2k": _shape(5, 1_703_569, 1_705_044, 1_697_189, 444_403),
    "snap-8m": _shape(5, 9_998_039, 10_007_508, 9_981_015, 2_567_921),
    "snap-512m": _shape(5, 57_401_314, 57_450_484, 57_212_317, 14_916_879),
    "snap-32g": _shape(5, 80_978_488, 81_049_504, 80_743_581, 20_983_607),
    "snap-64g": _shape(5, 84_931_220, 85_006_106, 84_682_725, 22_012_683),
}


def known_constraints(circuit_id: str) -> int | None:
    """The rows of a Filecoin circuit id (`KNOWN_SHAPES`); None for other ids."""
    known = KNOWN_SHAPES.get(circuit_id)
    return None if known is None else known.num_constraints

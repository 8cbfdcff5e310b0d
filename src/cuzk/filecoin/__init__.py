"""Filecoin's vanilla (non-circuit) proofs: the domain logic the circuits are fed from.

Everything here follows rust-fil-proofs 19.x as described in docs/circuits.md: sector sizes and
proof ids (`sizes`), the SDR graph (`graph`, on the numpy ChaCha core of `chacha`), challenge
derivation (`challenges`), SHA-256 and Poseidon Merkle trees (`merkle`, hashing levels in batches with
`poseidon_batch`), sealing and PoRep vanilla proofs (`porep`) with their C1 encodings (`c1`, `codec`),
sparse synthetic sectors for 32GiB/64GiB (`sparse`), PoSt (`post`) and SnapDeals (`snap`).

The package sits below the circuit layer: it never imports cuzk.r1cs, cuzk.gadgets, cuzk.circuits or
cuzk.groth16, so vanilla proofs can be generated, serialised and checked without any proving machinery.
"""

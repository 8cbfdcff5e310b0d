"""Filecoin's Groth16 circuits, row-exact with rust-fil-proofs so that the published `.params` apply.

Each circuit reproduces the input order, aux order, constraint order and coefficients of its Rust
counterpart (docs/circuits.md §4): any deviation, however harmless it looks, makes proofs made
with the published parameters fail. Witnesses are plain dataclasses of Python ints, independent of
how the vanilla proofs were produced; a blank instance (all values None) drives key generation and
shape checks without computing anything.

- `porep`: the StackedDRG PoRep "C2" circuit (`StackedCircuit`) and its public inputs.
"""

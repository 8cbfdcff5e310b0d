"""cuzk: a Groth16 (BLS12-381) proving daemon for Filecoin proofs."""

__version__ = "0.1.0"

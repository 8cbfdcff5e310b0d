"""Groth16 over BLS12-381 in bellperson's formulation: keys, parameter generation, prover, verifier,
bellperson file formats (.params/.vk/proofs) and snarkjs interop (.zkey/.wtns/JSON)."""

"""Groth16 over BLS12-381 in bellperson's formulation: keys, parameter generation, prover, verifier;
the file formats (bellperson's .params/.vk, snarkjs's .zkey/.wtns/JSON, circom) are in `formats`."""

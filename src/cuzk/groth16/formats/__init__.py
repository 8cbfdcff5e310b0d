"""Groth16 file formats, read and written byte for byte: bellperson's `.params` / `.vk` files
(`params_file`, and `params_shape` for what a circuit's file must look like), the iden3 binary
container (`binfile`) and snarkjs's `.zkey` and `.wtns` files, snarkjs's JSON keys, proofs and
public signals (`snarkjs_json`), and circom circuits proven from those artefacts (`circom`).

The protocol steps that produce and use what these files hold (keys, setup, prover, verifier) are
the modules of `cuzk.groth16` itself.
"""

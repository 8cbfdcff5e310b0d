"""Hash functions as Filecoin's proofs use them (natively, outside circuits).

Circuit versions live in :mod:`cuzk.gadgets`; both must agree bit for bit, because the circuits
prove statements about values these functions computed (Merkle roots, column digests).
"""

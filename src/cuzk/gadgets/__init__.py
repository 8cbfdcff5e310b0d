"""Circuit gadgets: reusable pieces of R1CS written against :class:`cuzk.r1cs.ConstraintSystem`.

Each gadget emits exactly the rows (order, operands, coefficients) of its bellperson / neptune
counterpart, because Filecoin's published Groth16 parameters were generated from those rows.
"""

"""The Filecoin circuit providers: PoRep C2, WinningPoSt, WindowPoSt and SnapDeals requests as engine jobs.

`payload`: what each kind's request carries and the checks made at submit; `recipe`: the partition
recipe a synthesis process runs; `provider`: the providers (parameter files, shapes, plans) and
`filecoin_providers`, the four of a daemon. The circuits themselves are `cuzk.circuits.filecoin`.
"""

"""Circuits: small example circuits now; the Filecoin circuits (PoRep, PoSt, SnapDeals) live here too."""

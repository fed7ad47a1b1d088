"""Verification: the rule records op kinds share (rules.py), the verifier driver
(verifier.py: each op's rule, then what spans ops), the legality pass (legality.py: what a
lowering to the hardware also needs) and static LX accounting (lx_liveness.py)."""

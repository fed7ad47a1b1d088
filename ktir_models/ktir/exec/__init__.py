"""Execution: a verified Function compiled to a Plan (compile.py) and run on a Machine
(machine.py: HBM, LX, the grid) by one strategy per plan (plan.py, strategies.py); the run-time
values op builders produce (execute.py, memory_views.py, stacked_values.py, tape.py), the
batched forms (stacked.py, reroll.py, ragged_steps.py), twins and the optional checks."""

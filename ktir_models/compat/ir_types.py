"""``ktir_cpu.ir_types``: the memory-space names of the ``#ktdp.memory_space`` attribute."""

KTDP_MEMORY_SPACE_KINDS = {"global": "HBM", "ct_local": "LX"}

"""KTIR text for each node kind of a llama forward: RMSNorm, GEMM (with fused epilogues), RoPE,
attention. Each module turns shapes and argument names into the text of one kernel."""

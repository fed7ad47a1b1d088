"""`ktir-models forward`, `emit`, `generate`: whole-model forwards."""

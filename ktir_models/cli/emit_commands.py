"""`ktir-models emit` and `generate`: our own KTIR emitter."""

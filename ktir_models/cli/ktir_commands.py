"""`ktir-models check` and `ktir-models run`: the emulator on single KTIR files."""

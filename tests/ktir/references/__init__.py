"""Independent numpy references for the KTIR corpus tests.

Each module holds the maths of one kernel family, written from the model / algorithm definition
(float32 or float64 throughout, one rounding at the end when a caller asks for float16), never by
transliterating a KTIR program op by op. The tests compare the emulator against these with stated
float16 tolerances.
"""

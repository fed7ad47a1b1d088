"""Array back ends for the emulator's hot loops.

``f16_chain`` runs the one inherently sequential f16 pattern of the corpus (a K-loop adding f16
partials to an f16 accumulator, rounding once per trip) with torch's vectorised half arithmetic when
torch is installed, and with numpy otherwise. Both give bit-identical results.
"""

"""Fitting cost models from profile tables and validating simulated against measured runs.

Third floor: may import the simulator and the engine. Filled in by the calibration issue.
"""

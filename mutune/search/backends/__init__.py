"""Backends execute what the driver loop decides (Syne Tune's third part)."""

"""Backends execute what the driver loop decides (Syne Tune's third part).

* :mod:`.ray_tune` — real trials on a Ray cluster through Ray Tune (imports Ray);
* :mod:`.simulated` — the same driver on synthetic curves with a simulated clock;
* :mod:`.replay` — the same driver on a recorded sweep's curves, training nothing.
"""

"""What runs inside a trial's worker: the training loop, its checkpoints, its logs and its
device monitor. Nothing here decides or records; the driver process does both.

* :mod:`.trainable` — the loop and the Ray function trainable around it;
* :mod:`.checkpoint` — atomic, resumable trial checkpoints;
* :mod:`.logs` — the stdout/stderr/traceback a trial leaves for the driver;
* :mod:`.gpu_monitor` — NVML utilization and memory of a CUDA trial.
"""

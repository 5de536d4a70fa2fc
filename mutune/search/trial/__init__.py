"""What runs inside a trial's worker: loop, checkpoints, logs, device monitor; no decisions."""

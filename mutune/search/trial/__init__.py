"""What runs inside a trial's worker: the training loop, its checkpoints, its logs and its
device monitor. Nothing here decides or records; the driver process does both."""

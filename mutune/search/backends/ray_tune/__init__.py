"""The Ray Tune backend (imports Ray): cluster, run, the two adapters, the driver-side book."""

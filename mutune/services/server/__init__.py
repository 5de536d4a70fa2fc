"""The search server: the FastAPI app, its auth and settings, submissions, the dashboard, the
worker that runs queued sweeps, and the Python client (docs/architecture.md §8)."""

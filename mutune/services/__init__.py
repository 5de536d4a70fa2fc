"""Service layer of mutune: the results store, the server, the worker and the client."""

"""Routers of the REST API, one module per resource."""

"""Provenance database: SQLAlchemy 2.0 models, engine/session factory, query functions."""

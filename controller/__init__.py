"""Bindery: a Kubernetes controller binding AI agents to the typed resources and tools they use."""

__version__ = "0.1.0"

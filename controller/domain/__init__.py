"""Pure domain logic: models, type closure, slot resolution, work holds, launch planning.

Nothing here imports kopf or the Kubernetes client (an import-linter contract enforces it).
"""

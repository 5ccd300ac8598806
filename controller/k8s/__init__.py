"""The Kubernetes edge: object builders that return manifests, and the small I/O layer."""

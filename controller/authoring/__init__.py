"""Authoring: Agent Spec KDL and tool YAML to Bindery manifests, and back (docs/kdl.md).

No kopf and no Kubernetes client here: these are pure conversions and checks, used by the
``bindery render``, ``export`` and ``import-tool`` commands (:mod:`controller.cli.authoring`).
"""

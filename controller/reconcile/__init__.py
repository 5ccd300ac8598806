"""The reconcile layer: the view of the cluster, the queue, the write seam and the reconcilers.

``store`` keeps the latest version of every object; ``intake`` maps each observed version to the
requests it affects; ``workers`` builds one ``passes.Pass`` per request (the request, its object,
its old status, one reading of the ``clock``) and runs the per-kind reconcilers (``kinds``,
``agent``) with it; they write only through ``writer`` and ask for the next pass only through the
``result`` they return; ``holds``, ``delivery``, ``acks``, ``workspace`` and ``sessions`` carry
out the agent pass's steps; ``events`` posts Events; ``resync`` and ``catchup`` keep the view
whole; ``controller`` wires it all together. The import contract in pyproject.toml orders them.
"""

from controller.reconcile.controller import Controller

__all__ = ["Controller"]

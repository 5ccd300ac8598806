"""The reconcile layer: the view of the cluster, the queue, the write seam and the reconcilers.

``store`` keeps the latest version of every object; ``intake`` maps each observed version to the
requests it affects; ``workers`` runs the per-kind reconcilers (``kinds``, ``agent``), which
write only through ``writer``; ``holds``, ``delivery`` and ``sessions`` carry out the agent
pass's steps; ``events`` posts Events; ``controller`` wires it all together.
"""

from controller.reconcile.controller import Controller

__all__ = ["Controller"]

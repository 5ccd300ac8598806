"""The development harness of Bindery, kept apart from the product like controller-runtime's
envtest: the local control plane (:mod:`.cluster`, built by ``tools/build.sh`` beside it, and
its command ``python -m harness cluster up|down|env``, :mod:`.cli`), the
controller as a child process (:mod:`.process`), the synchronous API client and watch
(:mod:`.kube`) and stand-ins for the API server (:mod:`.fakes`), shared by tests, bench and
chaos. It may import ``controller`` and imports none of ``tests``, ``bench`` or ``chaos``;
nothing under ``controller`` imports it, and the wheel does not ship it (the import contracts in
pyproject.toml hold all of this).
"""

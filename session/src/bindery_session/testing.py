"""A bindings source for testing a runtime without a cluster.

:class:`FakeBindings` plays the session pod's side: it delivers documents into a directory the
way the delivery sidecar does (the controller's canonical bytes, replaced by temp file and
rename), and reads back what the runtime acknowledged. Point the runtime at it through
:meth:`FakeBindings.environ` (or its two paths)::

    from bindery_session import BindingsWatcher
    from bindery_session.testing import FakeBindings

    def test_my_runtime_takes_up_its_work() -> None:
        with FakeBindings() as fake:
            sent = fake.deliver(resources={"work": "github-issue://o/p/1"})
            runtime = MyRuntime(BindingsWatcher(fake.bindings_file, acknowledge=True,
                                                ack_path=fake.ack_file))
            ...
            assert fake.wait_for(sent.digest).state == "Applied"
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from bindery_session._document import parse_bindings
from bindery_session.files import write_atomically
from bindery_session.wire import (
    ACK_ENV,
    ACK_FILE,
    APPLIED,
    BINDINGS_ENV,
    BINDINGS_FILE,
    AckRecord,
    AgentRef,
    Bindings,
    BindingState,
    DeliveredBinding,
    DeliveredResource,
    DeliveredTool,
    Fence,
)


class FakeBindings:
    """Delivers bindings documents to ``directory`` (a new temporary one by default, removed by
    :meth:`close`) and reads the runtime's acknowledgements back.

    The document is at :attr:`bindings_file` (``<directory>/bindings/bindings.json``); the runtime
    writes its acknowledgement to :attr:`ack_file` (``<directory>/ack/ack.json``).
    """

    def __init__(self, directory: str | Path | None = None, *, agent: str = "default/agent"):
        self._own = directory is None
        self.directory = Path(directory or tempfile.mkdtemp(prefix="bindery-fake-"))
        self.bindings_file = self.directory / "bindings" / BINDINGS_FILE
        self.ack_file = self.directory / "ack" / ACK_FILE
        self.bindings_file.parent.mkdir(parents=True, exist_ok=True)
        self.ack_file.parent.mkdir(parents=True, exist_ok=True)
        namespace, _, name = agent.rpartition("/")
        self.agent = AgentRef(namespace=namespace or "default", name=name)

    def environ(self) -> dict[str, str]:
        """The environment a session pod gives its runtime, pointing at these files."""
        return {BINDINGS_ENV: str(self.bindings_file), ACK_ENV: str(self.ack_file)}

    def document(
        self,
        resources: Mapping[str, str] | None = None,
        tools: Mapping[str, Mapping[str, str]] | None = None,
        *,
        fence: Fence | None = None,
    ) -> Bindings:
        """A document binding each role in ``resources`` to its URI, and each tool in ``tools``
        (``{tool: {slot: uri}}``) to resources by URI; ``fence`` is the ``work`` hold's token.
        The resource type is the URI's scheme."""
        return Bindings(
            agent=self.agent,
            resources=[
                DeliveredBinding(
                    name=role,
                    tag=_scheme(uri),
                    uri=uri,
                    state=BindingState.BOUND,
                    resource=DeliveredResource(uri=uri, type=_scheme(uri), alias=role),
                    hold=fence if role == "work" else None,
                )
                for role, uri in (resources or {}).items()
            ],
            tools=[
                DeliveredTool.model_validate(
                    {
                        "name": tool,
                        "slots": [
                            {
                                "name": slot,
                                "mode": "contextual",
                                "access": "read_write",
                                "resourceType": _scheme(uri),
                                "state": "Bound",
                                "resource": {"uri": uri, "type": _scheme(uri)},
                            }
                            for slot, uri in slots.items()
                        ],
                    }
                )
                for tool, slots in (tools or {}).items()
            ],
        )

    def deliver(
        self,
        document: Bindings | None = None,
        *,
        resources: Mapping[str, str] | None = None,
        tools: Mapping[str, Mapping[str, str]] | None = None,
        fence: Fence | None = None,
    ) -> Bindings:
        """Put ``document`` (else :meth:`document` of the other arguments) in place as the
        sidecar does; returns it as the runtime reads it, with its digest."""
        if document is None:
            document = self.document(resources, tools, fence=fence)
        raw = document.render().encode("utf-8")
        write_atomically(self.bindings_file, raw)
        return parse_bindings(raw, f"the bindings file {self.bindings_file}")

    def acknowledgement(self) -> AckRecord | None:
        """What the runtime last wrote (None: nothing yet, or not a record)."""
        try:
            return AckRecord.read(self.ack_file.read_bytes())
        except OSError:
            return None

    def wait_for(self, digest: str, state: str = APPLIED, timeout: float = 5.0) -> AckRecord:
        """The acknowledgement once the runtime wrote ``state`` for ``digest`` (any state when
        ``state`` is empty); :class:`TimeoutError` after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            record = self.acknowledgement()
            if record is not None and record.digest == digest and state in ("", record.state):
                return record
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"the runtime did not write {state or 'an acknowledgement'} for {digest} to "
                    f"{self.ack_file} within {timeout} s; it last wrote {record}"
                )
            time.sleep(0.005)

    def close(self) -> None:
        """Remove the directory (when this fake made it)."""
        if self._own:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> FakeBindings:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _scheme(uri: str) -> str:
    scheme, colon, _ = uri.partition(":")
    return scheme if colon else "uri"

"""structlog configuration: JSON lines when not on a terminal, a console renderer on one.

kopf and the Kubernetes client log through the standard library; their records are routed through
structlog's ``ProcessorFormatter`` so every line in the controller's output has one shape.
"""

from __future__ import annotations

import logging
import sys

import structlog

KOPF_API_LOGGER = "kopf._cogs.clients.api"
KOPF_CLIENT_LOGGERS = (KOPF_API_LOGGER, "kopf._cogs.clients.watching")
"""The loggers kopf's request retries are logged to: ``api.request`` logs to its caller's logger,
and the watch streams pass their own (a watch started while the API server's storage for a
just-installed CRD is still initializing gets a 429 and is retried)."""


class RetriesAreWarnings(logging.Filter):
    """kopf logs each failed attempt of a request it will retry at ERROR ("Request attempt 2/5
    failed; will retry: ..."): during an API-server restart every watch logs several, and all of
    them recover by themselves. They are warnings; the attempt kopf gives up on ("escalating")
    stays an error, as does the failure it then raises."""

    TRANSIENT = ("; will retry", "; will re-authenticate")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.ERROR and any(
            marker in record.getMessage() for marker in self.TRANSIENT
        ):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


ACCESS_LOGGER = "aiohttp.access"
"""Where aiohttp's servers log each request: here, kopf's liveness endpoint (``--liveness``)."""


class ProbesAreQuiet(logging.Filter):
    """The liveness endpoint answers a probe every few seconds, and aiohttp logs each answer as
    an access line at INFO: in a running controller's log they would bury what it did. Answers
    that went well are dropped; a request the endpoint failed (status 400 or more) still shows."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "response_status", None)
        return not isinstance(status, int) or status >= 400


def configure(level: str = "INFO", *, json: bool | None = None) -> None:
    """Configure structlog and route stdlib logging (kopf, kubernetes) through it."""
    if json is None:
        json = not sys.stderr.isatty()
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            # First: a message below the level costs one level check, not the chain (a pass
            # logs at DEBUG, tens of thousands of times at a large start-up).
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            renderer,
        ],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The Kubernetes client logs every request at DEBUG; keep it quiet unless asked.
    logging.getLogger("kubernetes").setLevel(max(logging.INFO, root.level))
    logging.getLogger("urllib3").setLevel(logging.WARNING)
    # kopf says "Handler ... succeeded" for every watch event; our handlers only feed the
    # controller's intake, which logs what matters. Failures (ERROR) still come through.
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    access = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(f, ProbesAreQuiet) for f in access.filters):
        access.addFilter(ProbesAreQuiet())
    for name in KOPF_CLIENT_LOGGERS:
        client = logging.getLogger(name)
        if not any(isinstance(f, RetriesAreWarnings) for f in client.filters):
            client.addFilter(RetriesAreWarnings())

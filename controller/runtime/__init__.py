"""The controller process around the reconcilers: kopf glue (operator, handlers), leader election,
start-up checks (preflight), log set-up and the exit codes they share."""

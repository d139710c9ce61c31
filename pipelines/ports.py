"""Check that the ports ``foresight serve`` listens on are free, before starting anything.

Details: docs/jobs.md, "Notes from the code", `pipelines/ports.py`."""

from __future__ import annotations

import socket

from forecaster.exceptions import ConfigError


def ensure_free(host: str, port: int, what: str, how_to_change: str) -> None:
    """Raise unless ``host:port`` can be listened on now.

    Args:
        what: what would listen there (``"the API"``), for the message.
        how_to_change: the option or variable that picks another port.

    Raises:
        ConfigError: the port is taken (or the address is not this machine's).
    """
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        # As the servers do, so a port left in TIME_WAIT by a last run counts as free;
        # on Linux the bind still fails while anything listens there.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ConfigError(
                f"port {port} on {host} is taken ({exc.strerror}), so {what} cannot listen "
                f"there: stop what uses it, or choose another port with {how_to_change}"
            ) from exc


def main(argv: list[str] | None = None) -> int:
    """``python -m pipelines.ports HOST API_PORT UI_PORT``: ``make run``'s first step.

    Training takes minutes; a taken port should stop ``make run`` before it, not after.
    """
    import sys

    host, api, ui = argv if argv is not None else sys.argv[1:]
    try:
        ensure_free(host, int(api), "the API", "make run PORT=...")
        ensure_free(host, int(ui), "the MLflow UI", "make run MLFLOW_UI_PORT=...")
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

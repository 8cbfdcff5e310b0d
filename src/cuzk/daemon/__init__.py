"""The daemon's process lifecycle: where its state lives, who it is, and how it is started and stopped.

The Rust daemon's operators found instances by name (`pkill -f`), waited with `sleep`, and trusted
`grep ready` on log files that outlived the run that wrote them. Everything here identifies a daemon
by what cannot be stale:

- `state`: the state directory (pid file, instance record, job journal, one log file per instance);
- `pidfile`: an exclusively locked pid file, and process identity as (pid, start time in
  /proc/<pid>/stat), so a dead daemon or a reused pid is never mistaken for a live daemon;
- `identity`: the instance id (random per start), config fingerprint, version, start time;
- `notify`: systemd readiness (`Type=notify`) written straight to $NOTIFY_SOCKET;
- `probe`: who holds an address (a cuzk daemon answering GetDaemonInfo, or something else), and
  removal of a unix socket file only after nothing answered on it;
- `runner`: `cuzk daemon run` (foreground): lock, probe, serve, drain, clean up;
- `control`: `cuzk daemon start|stop|restart|status|logs`;
- `attribution`: for clients, which daemon instance and configuration produced a result.

Nothing in this package imports the engine or gRPC at module import, so `cuzk daemon run` can refuse
a taken address or a running instance before any heavy import.
"""

"""grpc.health.v1 for the daemon: SERVING once the engine and listeners are up, NOT_SERVING while
draining or while no device can prove, so supervisors and load balancers can probe readiness with a
standard client."""

from __future__ import annotations

from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from cuzk.server.grpc_service import SERVICE_NAME


class DaemonHealth:
    def __init__(self) -> None:
        self.servicer = health.HealthServicer()
        self.set_serving(False)

    def add_to_server(self, server: object) -> None:
        health_pb2_grpc.add_HealthServicer_to_server(self.servicer, server)

    def set_serving(self, serving: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for service in ("", SERVICE_NAME):
            self.servicer.set(service, status)

    def shutdown(self) -> None:
        self.servicer.enter_graceful_shutdown()

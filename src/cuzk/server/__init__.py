"""The daemon's front ends: the cuzk.v1 gRPC service, the HTTP status/metrics endpoint, health, a client."""

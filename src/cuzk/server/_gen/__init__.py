"""Generated protobuf/gRPC modules for cuzk.v1 (see cuzk.server.gen_proto); do not edit by hand."""

//! The NBD protocol: pure encode/decode, a session generic over its transport, and the server.

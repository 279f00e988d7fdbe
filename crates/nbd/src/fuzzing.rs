//! Drives one session from a byte string, for the fuzz target and the property
//! tests: the bytes are everything a client sends, and the session runs inline
//! (no worker threads) against a small [`MemoryBackend`] with a writable and a
//! read-only export. Whatever the bytes, the session must end without panicking.

use crate::memory::MemoryBackend;
use crate::protocol::handshake::{ClientOption, InfoRequest, MetaContextRequest};
use crate::protocol::handshake::{CLIENT_FLAG_FIXED_NEWSTYLE, CLIENT_FLAG_NO_ZEROES};
use crate::session::{Session, SessionConfig, SessionEnd, SessionError};

/// Name of the writable fuzzing export (1 MiB).
pub const FUZZ_EXPORT: &str = "disk";
/// Name of the read-only fuzzing export (64 KiB).
pub const FUZZ_READ_ONLY_EXPORT: &str = "snapshot";

/// The backend every fuzzed session runs on.
pub fn fuzz_backend() -> MemoryBackend {
    let mut backend = MemoryBackend::new();
    backend.add_export(FUZZ_EXPORT, 1 << 20, false);
    let snapshot = backend.add_export(FUZZ_READ_ONLY_EXPORT, 64 << 10, true);
    snapshot.load(0, &[0xa5; 4096]);
    backend
}

/// Runs a session on `client_bytes` and returns how it ended and what the server
/// sent.
pub fn run_session_on_bytes(client_bytes: &[u8]) -> (Result<SessionEnd, SessionError>, Vec<u8>) {
    let backend = fuzz_backend();
    let config = SessionConfig { connection_label: "fuzz".to_owned() };
    let mut server_bytes = Vec::new();
    let result = Session::new(&backend, config).run(client_bytes, &mut server_bytes);
    (result, server_bytes)
}

/// A valid client handshake up to transmission on [`FUZZ_EXPORT`], with structured
/// replies and `base:allocation`: a prefix that takes fuzzed bytes straight to the
/// transmission phase.
pub fn client_handshake_bytes() -> Vec<u8> {
    let mut bytes = (CLIENT_FLAG_FIXED_NEWSTYLE | CLIENT_FLAG_NO_ZEROES).to_be_bytes().to_vec();
    bytes.extend(ClientOption::StructuredReply.encode());
    let contexts = MetaContextRequest { export_name: FUZZ_EXPORT.into(), queries: vec!["base:allocation".into()] };
    bytes.extend(ClientOption::SetMetaContext(contexts).encode());
    bytes.extend(ClientOption::Go(InfoRequest { export_name: FUZZ_EXPORT.into(), info_items: vec![] }).encode());
    bytes
}

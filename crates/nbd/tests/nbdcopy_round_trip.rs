//! nbdcopy copies a file into an export over several connections, from one export
//! to another, and back out, unchanged.

use crate::common;

use std::process::Command;
use std::sync::Arc;

use common::{run, seeded_bytes, write_file, TestServer};
use proxima_nbd::MemoryBackend;

const IMAGE_BYTES: usize = 40 << 20;

#[test]
fn nbdcopy_in_across_and_out() {
    let backend =
        MemoryBackend::new().with_export("a", IMAGE_BYTES as u64, false).with_export("b", IMAGE_BYTES as u64, false);
    let server = TestServer::start(Arc::new(backend));
    let mut image = seeded_bytes(1234, IMAGE_BYTES);
    image[20 << 20..24 << 20].fill(0);
    let source = server.path("source.raw");
    write_file(&source, &image);

    run(Command::new("nbdcopy").args(["--connections=4", "--flush"]).arg(&source).arg(server.uri("a")));
    run(Command::new("nbdcopy").arg(server.uri("a")).arg(server.uri("b")));
    let copy = server.path("copy.raw");
    write_file(&copy, &[]);
    run(Command::new("nbdcopy").arg(server.uri("b")).arg(&copy));
    assert!(std::fs::read(&copy).unwrap() == image, "the copy differs from the source");
}

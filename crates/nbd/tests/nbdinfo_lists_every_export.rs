//! `nbdinfo --list` against the server shows every export with its size, its
//! read-only flag, the block size constraints and multi-conn.

use crate::common;

use std::process::Command;
use std::sync::Arc;

use common::{run, TestServer};
use proxima_nbd::MemoryBackend;

#[test]
fn nbdinfo_lists_every_export_and_its_size() {
    let backend = MemoryBackend::new()
        .with_export("disk", 64 << 20, false)
        .with_export("lun1", 3 << 20, false)
        .with_export("disk@snap", 64 << 20, true);
    let server = TestServer::start(Arc::new(backend));
    let output = run(Command::new("nbdinfo").args(["--list", "--json"]).arg(server.uri("")));
    let listing: serde_json::Value = serde_json::from_slice(&output.stdout).expect("nbdinfo JSON");
    let exports = listing["exports"].as_array().expect("exports array");
    let described: Vec<(String, u64, bool)> = exports
        .iter()
        .map(|export| {
            (
                export["export-name"].as_str().unwrap().to_owned(),
                export["export-size"].as_u64().unwrap(),
                export["is_read_only"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        described,
        vec![
            ("disk".to_owned(), 64 << 20, false),
            ("lun1".to_owned(), 3 << 20, false),
            ("disk@snap".to_owned(), 64 << 20, true),
        ]
    );
    for export in exports {
        assert_eq!(export["block_size_minimum"].as_u64(), Some(512), "{export}");
        assert_eq!(export["block_size_preferred"].as_u64(), Some(4096), "{export}");
        assert_eq!(export["block_size_maximum"].as_u64(), Some(1 << 25), "{export}");
        assert_eq!(export["can_multi_conn"].as_bool(), Some(true), "{export}");
        assert_eq!(export["can_flush"].as_bool(), Some(true), "{export}");
    }
    assert_eq!(exports[0]["can_trim"].as_bool(), Some(true));
    assert_eq!(exports[0]["can_zero"].as_bool(), Some(true));
    assert_eq!(exports[0]["can_fast_zero"].as_bool(), Some(true));
    assert_eq!(listing["protocol"].as_str(), Some("newstyle-fixed"));
    let summary = server.stop();
    assert_eq!(summary.failed_connection_count, 0);
}

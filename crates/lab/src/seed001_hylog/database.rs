//! A database's pages on an engine extent, shared by the TPC-B and TPC-C
//! runs: the serial load before a run, and a buffer pool's page I/O applied
//! to the extent (one block per page, no payload).

use proxima_device::BlockDevice;
use proxima_engine::{EngineError, Volume};
use proxima_workload::buffer_pool::PageIo;
use proxima_workload::Operation;

/// Blocks written per request when a database is loaded.
const LOAD_CHUNK_BLOCKS: u64 = 4096;

/// Writes pages `[0, pages)` of extent `id` in order, in large writes, and
/// flushes: the database packed at the front of the data device.
pub fn load<D: BlockDevice, F: BlockDevice>(volume: &mut Volume<D, F>, id: u64, pages: u64) -> Result<(), EngineError> {
    let mut first = 0;
    while first < pages {
        let count = LOAD_CHUNK_BLOCKS.min(pages - first);
        volume.write_blocks_synthetic(id, first, count, false)?;
        first += count;
    }
    volume.flush()
}

/// Reads or writes the page of `io` in extent `id`.
pub fn apply<D: BlockDevice, F: BlockDevice>(
    volume: &mut Volume<D, F>,
    id: u64,
    io: &PageIo,
) -> Result<(), EngineError> {
    match io.operation {
        Operation::Read => volume.read_blocks_synthetic(id, io.page, 1).map(drop),
        _ => volume.write_blocks_synthetic(id, io.page, 1, false),
    }
}

//! Byte layouts of every on-disk structure (docs/format.md), and nothing else:
//! pure encoders and decoders. Decoders never panic on arbitrary bytes; they
//! return a description of the first check that failed.

/// Size of every block on both devices.
pub const BLOCK_SIZE: usize = 4096;
/// Size of the common header.
pub const HEADER_SIZE: usize = 48;
/// Bytes after the header.
pub const BODY_SIZE: usize = BLOCK_SIZE - HEADER_SIZE;
/// `PXMB` read as a little-endian u32.
pub const MAGIC: u32 = u32::from_le_bytes(*b"PXMB");
/// The format version this code reads and writes.
pub const VERSION: u16 = 4;
/// Bit 63 of a location: the block is on the flash device (staged).
pub const FLASH_LOCATION_BIT: u64 = 1 << 63;
/// Longest extent or snapshot name, in bytes.
pub const NAME_CAPACITY: usize = 64;
/// Flash blocks of the two superblock slots.
pub const SUPERBLOCK_SLOTS: [u64; 2] = [0, 1];

const _: () = assert!(BLOCK_SIZE.is_power_of_two());
const _: () = assert!(HEADER_SIZE < BLOCK_SIZE);
const _: () = assert!(HEADER_SIZE.is_multiple_of(8));
const _: () = assert!(NAME_CAPACITY <= u8::MAX as usize);
const _: () = assert!(SUPERBLOCK_SLOTS[0] != SUPERBLOCK_SLOTS[1]);

/// What a metadata block is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum BlockKind {
    /// A superblock slot.
    Superblock = 1,
    /// A node of an extent's map.
    MapNode = 2,
    /// A node of the extent table.
    ExtentTableNode = 3,
    /// A node of the snapshot table.
    SnapshotTableNode = 4,
    /// A bitmap page.
    BitmapPage = 5,
    /// A bitmap index node.
    BitmapIndexNode = 6,
    /// A log record block.
    LogBlock = 7,
    /// A page of a checksum table.
    ChecksumPage = 8,
    /// An index node of a checksum table.
    ChecksumIndexNode = 9,
    /// A node of the copy-out table.
    CopyOutTableNode = 10,
    /// A node of the delete log.
    DeleteLogNode = 11,
    /// A node of the segment usage table.
    SegmentUsageNode = 12,
    /// A page of the refcount file.
    RefcountPage = 13,
    /// An index node of the refcount file.
    RefcountIndexNode = 14,
}

impl BlockKind {
    fn from_u16(value: u16) -> Option<Self> {
        Some(match value {
            1 => Self::Superblock,
            2 => Self::MapNode,
            3 => Self::ExtentTableNode,
            4 => Self::SnapshotTableNode,
            5 => Self::BitmapPage,
            6 => Self::BitmapIndexNode,
            7 => Self::LogBlock,
            8 => Self::ChecksumPage,
            9 => Self::ChecksumIndexNode,
            10 => Self::CopyOutTableNode,
            11 => Self::DeleteLogNode,
            12 => Self::SegmentUsageNode,
            13 => Self::RefcountPage,
            14 => Self::RefcountIndexNode,
            _ => return None,
        })
    }

    /// A short name for errors and reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Superblock => "superblock",
            Self::MapNode => "map node",
            Self::ExtentTableNode => "extent-table node",
            Self::SnapshotTableNode => "snapshot-table node",
            Self::BitmapPage => "bitmap page",
            Self::BitmapIndexNode => "bitmap index node",
            Self::LogBlock => "log record block",
            Self::ChecksumPage => "checksum page",
            Self::ChecksumIndexNode => "checksum index node",
            Self::CopyOutTableNode => "copy-out table node",
            Self::DeleteLogNode => "delete-log node",
            Self::SegmentUsageNode => "segment-usage node",
            Self::RefcountPage => "refcount page",
            Self::RefcountIndexNode => "refcount index node",
        }
    }
}

/// The common header of every metadata block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// What the block is.
    pub kind: BlockKind,
    /// 0 for a leaf, ≥ 1 for an index node.
    pub level: u8,
    /// Number of entries in the body.
    pub entry_count: u16,
    /// The volume the block belongs to.
    pub volume_id: u64,
    /// Extent id (map nodes), mount count (log blocks), else 0.
    pub owner: u64,
    /// The CP that wrote the block.
    pub generation: u64,
    /// First key covered, page index, or log sequence number.
    pub key: u64,
}

/// Little-endian field access on a byte slice whose length the caller checked.
pub(crate) fn get_u16(bytes: &[u8], offset: usize) -> u16 {
    u16::from_le_bytes([bytes[offset], bytes[offset + 1]])
}
pub(crate) fn get_u32(bytes: &[u8], offset: usize) -> u32 {
    let mut array = [0; 4];
    array.copy_from_slice(&bytes[offset..offset + 4]);
    u32::from_le_bytes(array)
}
pub(crate) fn get_u64(bytes: &[u8], offset: usize) -> u64 {
    let mut array = [0; 8];
    array.copy_from_slice(&bytes[offset..offset + 8]);
    u64::from_le_bytes(array)
}
pub(crate) fn put_u16(bytes: &mut [u8], offset: usize, value: u16) {
    bytes[offset..offset + 2].copy_from_slice(&value.to_le_bytes());
}
pub(crate) fn put_u32(bytes: &mut [u8], offset: usize, value: u32) {
    bytes[offset..offset + 4].copy_from_slice(&value.to_le_bytes());
}
pub(crate) fn put_u64(bytes: &mut [u8], offset: usize, value: u64) {
    bytes[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
}

/// crc32c of a block with its checksum field (bytes 8..12) taken as zero.
pub fn block_crc(block: &[u8]) -> u32 {
    assert_eq!(block.len(), BLOCK_SIZE, "a block is {BLOCK_SIZE} bytes");
    let crc = crc32c::crc32c(&block[..8]);
    let crc = crc32c::crc32c_append(crc, &[0; 4]);
    crc32c::crc32c_append(crc, &block[12..])
}

/// A zeroed block with `header` written and its checksum not yet set.
pub fn new_block(header: &Header) -> Vec<u8> {
    let mut block = vec![0; BLOCK_SIZE];
    put_u32(&mut block, 0, MAGIC);
    put_u16(&mut block, 4, VERSION);
    put_u16(&mut block, 6, header.kind as u16);
    block[12] = header.level;
    put_u16(&mut block, 14, header.entry_count);
    put_u64(&mut block, 16, header.volume_id);
    put_u64(&mut block, 24, header.owner);
    put_u64(&mut block, 32, header.generation);
    put_u64(&mut block, 40, header.key);
    block
}

/// Sets a finished block's checksum and returns it.
pub fn seal_block(block: &mut [u8]) -> u32 {
    let crc = block_crc(block);
    put_u32(block, 8, crc);
    crc
}

/// Checks length, magic, version and checksum, and decodes the header.
pub fn decode_header(block: &[u8]) -> Result<Header, String> {
    if block.len() != BLOCK_SIZE {
        return Err(format!("block is {} bytes, expected {BLOCK_SIZE}", block.len()));
    }
    let magic = get_u32(block, 0);
    if magic != MAGIC {
        return Err(format!("bad magic {magic:#010x}"));
    }
    let version = get_u16(block, 4);
    if version != VERSION {
        return Err(format!("unsupported format version {version}"));
    }
    let stored_crc = get_u32(block, 8);
    let computed_crc = block_crc(block);
    if stored_crc != computed_crc {
        return Err(format!("checksum {stored_crc:#010x} does not match contents ({computed_crc:#010x})"));
    }
    let kind_value = get_u16(block, 6);
    let kind = BlockKind::from_u16(kind_value).ok_or_else(|| format!("unknown block kind {kind_value}"))?;
    Ok(Header {
        kind,
        level: block[12],
        entry_count: get_u16(block, 14),
        volume_id: get_u64(block, 16),
        owner: get_u64(block, 24),
        generation: get_u64(block, 32),
        key: get_u64(block, 40),
    })
}

/// The stored checksum of a block (bytes 8..12), without verifying it.
pub fn stored_crc(block: &[u8]) -> u32 {
    if block.len() < 12 {
        return 0;
    }
    get_u32(block, 8)
}

/// Names a child block, its checksum and the height of the tree below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct TreePointer {
    /// Flash block of the root (0 = empty tree).
    pub block: u64,
    /// crc32c of that block.
    pub crc: u32,
    /// Levels below the root (0 = the root is a leaf).
    pub height: u8,
}

impl TreePointer {
    /// Encoded size.
    pub const SIZE: usize = 16;

    /// Whether the tree is empty.
    pub fn is_empty(&self) -> bool {
        self.block == 0
    }

    /// Writes the pointer at `offset`.
    pub fn encode(&self, bytes: &mut [u8], offset: usize) {
        put_u64(bytes, offset, self.block);
        put_u32(bytes, offset + 8, self.crc);
        bytes[offset + 12] = self.height;
        bytes[offset + 13..offset + 16].fill(0);
    }

    /// Reads the pointer at `offset`.
    pub fn decode(bytes: &[u8], offset: usize) -> Self {
        Self { block: get_u64(bytes, offset), crc: get_u32(bytes, offset + 8), height: bytes[offset + 12] }
    }
}

/// The roots of one tree of metadata: the active one or a snapshot's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct RootSet {
    /// The extent table.
    pub extent_table: TreePointer,
    /// The snapshot table.
    pub snapshot_table: TreePointer,
    /// The data-device activemap.
    pub data_active: TreePointer,
    /// The data-device summary map.
    pub data_summary: TreePointer,
    /// The flash activemap.
    pub flash_active: TreePointer,
    /// The flash summary map.
    pub flash_summary: TreePointer,
    /// The data-device checksum table (empty on a volume without data checksums).
    pub data_checksums: TreePointer,
    /// The flash checksum table (staged data).
    pub flash_checksums: TreePointer,
    /// The copy-out table: where the in-place layout put the versions of
    /// frame blocks that snapshots read (empty unless it copied one out).
    pub copy_outs: TreePointer,
    /// The segment usage table: live blocks and age of each segment of the
    /// data device (empty unless a segment-writing layout keeps it).
    pub segment_usage: TreePointer,
    /// The refcount file: extra references to data blocks (empty: every
    /// count is zero).
    pub refcounts: TreePointer,
}

impl RootSet {
    /// Number of pointers.
    const POINTER_COUNT: usize = 11;
    /// Encoded size.
    pub const SIZE: usize = Self::POINTER_COUNT * TreePointer::SIZE;

    /// The pointers in their on-disk order.
    pub fn pointers(&self) -> [TreePointer; Self::POINTER_COUNT] {
        [
            self.extent_table,
            self.snapshot_table,
            self.data_active,
            self.data_summary,
            self.flash_active,
            self.flash_summary,
            self.data_checksums,
            self.flash_checksums,
            self.copy_outs,
            self.segment_usage,
            self.refcounts,
        ]
    }

    /// Writes the root set at `offset`.
    pub fn encode(&self, bytes: &mut [u8], offset: usize) {
        for (index, pointer) in self.pointers().iter().enumerate() {
            pointer.encode(bytes, offset + index * TreePointer::SIZE);
        }
    }

    /// Reads the root set at `offset`.
    pub fn decode(bytes: &[u8], offset: usize) -> Self {
        let pointer = |index: usize| TreePointer::decode(bytes, offset + index * TreePointer::SIZE);
        Self {
            extent_table: pointer(0),
            snapshot_table: pointer(1),
            data_active: pointer(2),
            data_summary: pointer(3),
            flash_active: pointer(4),
            flash_summary: pointer(5),
            data_checksums: pointer(6),
            flash_checksums: pointer(7),
            copy_outs: pointer(8),
            segment_usage: pointer(9),
            refcounts: pointer(10),
        }
    }
}

/// The two flash blocks one log record block is written to: every log block
/// is mirrored, so a corrupt copy in the middle of the log is told apart from
/// the end of the log, and repaired from the other copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct LogSlot {
    /// The first copy.
    pub primary: u64,
    /// The second copy.
    pub mirror: u64,
}

impl LogSlot {
    /// Encoded size.
    pub const SIZE: usize = 16;

    /// Both blocks.
    pub fn blocks(self) -> [u64; 2] {
        [self.primary, self.mirror]
    }

    fn encode(self, bytes: &mut [u8], offset: usize) {
        put_u64(bytes, offset, self.primary);
        put_u64(bytes, offset + 8, self.mirror);
    }

    fn decode(bytes: &[u8], offset: usize) -> Self {
        Self { primary: get_u64(bytes, offset), mirror: get_u64(bytes, offset + 8) }
    }
}

/// Superblock flag: the volume keeps data checksums.
pub const SUPERBLOCK_FLAG_DATA_CHECKSUMS: u32 = 1;
/// Superblock flag: data-device frees go through a tree log (TLog).
pub const SUPERBLOCK_FLAG_DELETE_LOG_TREE: u32 = 2;
/// Superblock flag: data-device frees go through a batched free log (BFLog).
pub const SUPERBLOCK_FLAG_DELETE_LOG_BATCHED: u32 = 4;
/// Every flag a superblock may carry.
const SUPERBLOCK_FLAGS_KNOWN: u32 =
    SUPERBLOCK_FLAG_DATA_CHECKSUMS | SUPERBLOCK_FLAG_DELETE_LOG_TREE | SUPERBLOCK_FLAG_DELETE_LOG_BATCHED;

/// Byte offsets of the superblock's fields (docs/format.md).
mod superblock_offsets {
    pub const BLOCK_SIZE: usize = 48;
    pub const FLAGS: usize = 52;
    pub const DATA_BLOCK_COUNT: usize = 56;
    pub const FLASH_BLOCK_COUNT: usize = 64;
    pub const MOUNT_COUNT: usize = 72;
    pub const NEXT_EXTENT_ID: usize = 80;
    pub const NEXT_SNAPSHOT_ID: usize = 88;
    pub const LOG_HEAD: usize = 96;
    pub const ROOTS: usize = 112;
    pub const DELETE_LOG: usize = ROOTS + super::RootSet::SIZE;
    pub const UNORDERED_BELOW: usize = DELETE_LOG + super::TreePointer::SIZE;
    pub const END: usize = UNORDERED_BELOW + 8;
}

/// A superblock's bytes lie in the block's first 512-byte sector (the rest is
/// zero in every generation), so a write torn at sector granularity leaves a
/// whole old or a whole new superblock: an invalid slot is damage, never a
/// crash outcome.
const _: () = assert!(superblock_offsets::END <= 512);
const _: () = assert!(superblock_offsets::LOG_HEAD + LogSlot::SIZE == superblock_offsets::ROOTS);

/// The contents of a superblock slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Superblock {
    /// The volume id.
    pub volume_id: u64,
    /// The CP number.
    pub generation: u64,
    /// Data device size in blocks.
    pub data_block_count: u64,
    /// Flash device size in blocks.
    pub flash_block_count: u64,
    /// Opens so far; salts the log epoch.
    pub mount_count: u64,
    /// Next extent id to hand out.
    pub next_extent_id: u64,
    /// Next snapshot id to hand out.
    pub next_snapshot_id: u64,
    /// Where the first log record block after this CP goes.
    pub log_head: LogSlot,
    /// Superblock flags ([`SUPERBLOCK_FLAG_DATA_CHECKSUMS`]).
    pub flags: u32,
    /// The active tree.
    pub roots: RootSet,
    /// The delete log of the active tree (empty without one; zeroes in a
    /// superblock written before delete logs existed).
    pub delete_log: TreePointer,
    /// Snapshots with an id below this one may break the 010 property (a
    /// clone from a snapshot brought their blocks back into the active
    /// tree); 0 when it holds for every snapshot.
    pub unordered_below_snapshot_id: u64,
}

impl Superblock {
    /// Whether the volume keeps data checksums.
    pub fn has_data_checksums(&self) -> bool {
        self.flags & SUPERBLOCK_FLAG_DATA_CHECKSUMS != 0
    }

    /// Encodes the superblock into a sealed block.
    pub fn encode(&self) -> Vec<u8> {
        let mut block = new_block(&Header {
            kind: BlockKind::Superblock,
            level: 0,
            entry_count: 0,
            volume_id: self.volume_id,
            owner: 0,
            generation: self.generation,
            key: 0,
        });
        use superblock_offsets as at;
        put_u32(&mut block, at::BLOCK_SIZE, u32::try_from(BLOCK_SIZE).expect("a block size fits u32"));
        put_u32(&mut block, at::FLAGS, self.flags);
        put_u64(&mut block, at::DATA_BLOCK_COUNT, self.data_block_count);
        put_u64(&mut block, at::FLASH_BLOCK_COUNT, self.flash_block_count);
        put_u64(&mut block, at::MOUNT_COUNT, self.mount_count);
        put_u64(&mut block, at::NEXT_EXTENT_ID, self.next_extent_id);
        put_u64(&mut block, at::NEXT_SNAPSHOT_ID, self.next_snapshot_id);
        self.log_head.encode(&mut block, at::LOG_HEAD);
        self.roots.encode(&mut block, at::ROOTS);
        self.delete_log.encode(&mut block, at::DELETE_LOG);
        put_u64(&mut block, at::UNORDERED_BELOW, self.unordered_below_snapshot_id);
        seal_block(&mut block);
        block
    }

    /// Decodes and verifies a superblock slot.
    pub fn decode(block: &[u8]) -> Result<Self, String> {
        let header = decode_header(block)?;
        if header.kind != BlockKind::Superblock {
            return Err(format!("holds a {}, not a superblock", header.kind.name()));
        }
        use superblock_offsets as at;
        let block_size = get_u32(block, at::BLOCK_SIZE);
        if block_size as usize != BLOCK_SIZE {
            return Err(format!("block size {block_size} is not {BLOCK_SIZE}"));
        }
        let flags = get_u32(block, at::FLAGS);
        if flags & !SUPERBLOCK_FLAGS_KNOWN != 0 {
            return Err(format!("unknown superblock flags {flags:#x}"));
        }
        if flags & SUPERBLOCK_FLAG_DELETE_LOG_TREE != 0 && flags & SUPERBLOCK_FLAG_DELETE_LOG_BATCHED != 0 {
            return Err("both delete-log flags are set".to_string());
        }
        Ok(Self {
            volume_id: header.volume_id,
            generation: header.generation,
            data_block_count: get_u64(block, at::DATA_BLOCK_COUNT),
            flash_block_count: get_u64(block, at::FLASH_BLOCK_COUNT),
            mount_count: get_u64(block, at::MOUNT_COUNT),
            next_extent_id: get_u64(block, at::NEXT_EXTENT_ID),
            next_snapshot_id: get_u64(block, at::NEXT_SNAPSHOT_ID),
            log_head: LogSlot::decode(block, at::LOG_HEAD),
            flags,
            roots: RootSet::decode(block, at::ROOTS),
            delete_log: TreePointer::decode(block, at::DELETE_LOG),
            unordered_below_snapshot_id: get_u64(block, at::UNORDERED_BELOW),
        })
    }
}

/// An entry of the delete log: a data block the active tree let go of and
/// the log holds until it is punched into the activemap. The key says where
/// in the log it sits (docs/format.md, "Delete log").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeleteLogEntry {
    /// The data block.
    pub block: u64,
}

impl TreeEntry for DeleteLogEntry {
    const SIZE: usize = 16;
    const KIND: BlockKind = BlockKind::DeleteLogNode;

    fn encode(&self, key: u64, out: &mut [u8]) {
        put_u64(out, 0, key);
        put_u64(out, 8, self.block);
    }

    fn decode(bytes: &[u8]) -> Result<(u64, Self), String> {
        Ok((get_u64(bytes, 0), Self { block: get_u64(bytes, 8) }))
    }
}

/// An entry of a copy-on-write tree leaf.
pub trait TreeEntry: Clone + PartialEq + std::fmt::Debug {
    /// Encoded size in bytes.
    const SIZE: usize;
    /// The block kind of this tree's nodes.
    const KIND: BlockKind;
    /// Writes the entry with its key into `out` (exactly `SIZE` bytes).
    fn encode(&self, key: u64, out: &mut [u8]);
    /// Reads an entry and its key from `bytes` (exactly `SIZE` bytes).
    fn decode(bytes: &[u8]) -> Result<(u64, Self), String>;
}

/// Entries of `E` that fit in one leaf.
pub const fn leaf_capacity(entry_size: usize) -> usize {
    BODY_SIZE / entry_size
}

/// Size of an index entry.
pub const INDEX_ENTRY_SIZE: usize = 24;
/// Index entries per node.
pub const INDEX_CAPACITY: usize = BODY_SIZE / INDEX_ENTRY_SIZE;
const _: () = assert!(INDEX_CAPACITY >= 2);

/// A map run: `count` logical blocks from the key on, at consecutive locations.
///
/// Held as three 32-bit words (12 bytes, 4-byte aligned), so that an entry of a
/// map costs 20 bytes with its key: the maps of an aged terabyte hold hundreds
/// of millions of runs (docs/engine.md, "Memory").
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Run {
    count: u32,
    location_low: u32,
    location_high: u32,
}

impl Run {
    /// The longest run one entry holds (the on-disk count is a u32).
    pub const MAX_BLOCKS: u64 = u32::MAX as u64;

    /// `count` blocks from `location` (bit 63 set: a flash block).
    ///
    /// # Panics
    /// If `count` is 0 or above [`Run::MAX_BLOCKS`]: callers split longer runs.
    pub fn new(count: u64, location: u64) -> Run {
        assert!(count > 0, "a run holds at least one block");
        let count = u32::try_from(count).expect("a run of more than Run::MAX_BLOCKS does not fit an entry");
        let [low, high] = split_u64(location);
        Run { count, location_low: low, location_high: high }
    }

    /// Number of blocks (1..=u32::MAX).
    pub fn count(self) -> u64 {
        u64::from(self.count)
    }

    /// Location of the first block (bit 63 set: a flash block).
    pub fn location(self) -> u64 {
        u64::from(self.location_high) << 32 | u64::from(self.location_low)
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Run").field("count", &self.count()).field("location", &self.location()).finish()
    }
}

impl TreeEntry for Run {
    const SIZE: usize = 20;
    const KIND: BlockKind = BlockKind::MapNode;

    fn encode(&self, key: u64, out: &mut [u8]) {
        put_u64(out, 0, key);
        put_u32(out, 8, self.count);
        put_u64(out, 12, self.location());
    }

    fn decode(bytes: &[u8]) -> Result<(u64, Self), String> {
        let count = u64::from(get_u32(bytes, 8));
        if count == 0 {
            return Err("run of zero blocks".into());
        }
        let key = get_u64(bytes, 0);
        let location = get_u64(bytes, 12);
        let block = location & !FLASH_LOCATION_BIT;
        if key.checked_add(count).is_none() || block.checked_add(count).is_none() {
            return Err(format!("run at {key} of {count} blocks overflows"));
        }
        Ok((key, Self::new(count, location)))
    }
}

fn encode_name(name: &str, out: &mut [u8], length_offset: usize, name_offset: usize) {
    assert!(!name.is_empty(), "names are validated at the API");
    assert!(name.len() <= NAME_CAPACITY, "names are validated at the API");
    out[length_offset] = u8::try_from(name.len()).expect("NAME_CAPACITY fits u8");
    out[name_offset..name_offset + name.len()].copy_from_slice(name.as_bytes());
}

fn decode_name(bytes: &[u8], length_offset: usize, name_offset: usize) -> Result<String, String> {
    let length = bytes[length_offset] as usize;
    if length == 0 || length > NAME_CAPACITY {
        return Err(format!("name length {length} is outside 1..={NAME_CAPACITY}"));
    }
    String::from_utf8(bytes[name_offset..name_offset + length].to_vec()).map_err(|_| "name is not UTF-8".to_string())
}

/// An extent-table record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtentRecord {
    /// The extent's name.
    pub name: String,
    /// Size in bytes, a multiple of 4096.
    pub size_bytes: u64,
    /// The extent's map.
    pub map: TreePointer,
    /// The CP that created it.
    pub created_generation: u64,
    /// The allocation ranges kept for its first writes, if any.
    pub reservation: Option<RangeReservation>,
}

/// Consecutive allocation ranges kept for one extent's first writes: window
/// `w` of the extent (its logical blocks `[w·R, (w+1)·R)`, R blocks per range)
/// is laid out in range `first_range + w`, so that first writes arriving in
/// any order end up in logical order. Advisory: allocation never refuses a
/// block for being reserved; the search for empty ranges passes over the
/// reservations until only reserved ranges are left (docs/layouts.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RangeReservation {
    /// The range window 0 goes to.
    pub first_range: u64,
    /// Ranges kept (at least 1; at most `u32::MAX`).
    pub range_count: u64,
}

impl RangeReservation {
    /// The range one past the last.
    pub fn end_range(&self) -> u64 {
        self.first_range + self.range_count
    }

    /// Whether `range` is one of the reserved ranges.
    pub fn contains(&self, range: u64) -> bool {
        (self.first_range..self.end_range()).contains(&range)
    }

    /// Whether the two share a range.
    pub fn overlaps(&self, other: &RangeReservation) -> bool {
        self.first_range < other.end_range() && other.first_range < self.end_range()
    }
}

impl TreeEntry for ExtentRecord {
    const SIZE: usize = 120;
    const KIND: BlockKind = BlockKind::ExtentTableNode;

    fn encode(&self, key: u64, out: &mut [u8]) {
        put_u64(out, 0, key);
        put_u64(out, 8, self.size_bytes);
        self.map.encode(out, 16);
        put_u64(out, 32, self.created_generation);
        encode_name(&self.name, out, 40, 56);
        if let Some(reservation) = self.reservation {
            let range_count =
                u32::try_from(reservation.range_count).expect("a reservation holds at most u32::MAX ranges");
            assert!(range_count > 0, "a reservation holds a range");
            put_u32(out, 44, range_count);
            put_u64(out, 48, reservation.first_range);
        }
    }

    fn decode(bytes: &[u8]) -> Result<(u64, Self), String> {
        let size_bytes = get_u64(bytes, 8);
        if !size_bytes.is_multiple_of(BLOCK_SIZE as u64) {
            return Err(format!("extent size {size_bytes} is not a multiple of {BLOCK_SIZE}"));
        }
        Ok((
            get_u64(bytes, 0),
            Self {
                name: decode_name(bytes, 40, 56)?,
                size_bytes,
                map: TreePointer::decode(bytes, 16),
                created_generation: get_u64(bytes, 32),
                reservation: match get_u32(bytes, 44) {
                    0 => None,
                    range_count => {
                        Some(RangeReservation { first_range: get_u64(bytes, 48), range_count: u64::from(range_count) })
                    }
                },
            },
        ))
    }
}

/// The state of a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum SnapshotState {
    /// Readable; holds its blocks.
    Live = 1,
    /// Deleted; its blocks are being reclaimed by a scan.
    Deleting = 2,
}

/// A snapshot-table record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotRecord {
    /// The snapshot's name.
    pub name: String,
    /// The CP it was taken from.
    pub generation: u64,
    /// Live or being deleted.
    pub state: SnapshotState,
    /// Next data-activemap page the deletion scan processes.
    pub scan_cursor: u64,
    /// Log head of that CP (flash blocks the snapshot holds).
    pub log_head: LogSlot,
    /// The tree of that CP.
    pub roots: RootSet,
}

/// Where a snapshot record's name begins: after its root set (a record is
/// 256 bytes plus one tree pointer for every root after the first nine).
const SNAPSHOT_NAME_OFFSET: usize = 48 + RootSet::SIZE;
const _: () = assert!(SNAPSHOT_NAME_OFFSET + NAME_CAPACITY <= <SnapshotRecord as TreeEntry>::SIZE);

impl TreeEntry for SnapshotRecord {
    const SIZE: usize = 288;
    const KIND: BlockKind = BlockKind::SnapshotTableNode;

    fn encode(&self, key: u64, out: &mut [u8]) {
        put_u64(out, 0, key);
        put_u64(out, 8, self.generation);
        out[16] = self.state as u8;
        encode_name(&self.name, out, 17, SNAPSHOT_NAME_OFFSET);
        put_u64(out, 24, self.scan_cursor);
        self.log_head.encode(out, 32);
        self.roots.encode(out, 48);
    }

    fn decode(bytes: &[u8]) -> Result<(u64, Self), String> {
        let state = match bytes[16] {
            1 => SnapshotState::Live,
            2 => SnapshotState::Deleting,
            other => return Err(format!("unknown snapshot state {other}")),
        };
        Ok((
            get_u64(bytes, 0),
            Self {
                name: decode_name(bytes, 17, SNAPSHOT_NAME_OFFSET)?,
                generation: get_u64(bytes, 8),
                state,
                scan_cursor: get_u64(bytes, 24),
                log_head: LogSlot::decode(bytes, 32),
                roots: RootSet::decode(bytes, 48),
            },
        ))
    }
}

/// An entry of the copy-out table (key: the copy block): the version of
/// `frame` that snapshots with ids up to `watermark` (and above the frame's
/// previous watermark) see lives at the copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyOutRecord {
    /// The frame block the copy was taken of.
    pub frame: u64,
    /// The youngest snapshot id the copy serves.
    pub watermark: u64,
}

impl TreeEntry for CopyOutRecord {
    const SIZE: usize = 24;
    const KIND: BlockKind = BlockKind::CopyOutTableNode;

    fn encode(&self, key: u64, out: &mut [u8]) {
        put_u64(out, 0, key);
        put_u64(out, 8, self.frame);
        put_u64(out, 16, self.watermark);
    }

    fn decode(bytes: &[u8]) -> Result<(u64, Self), String> {
        let (copy, frame, watermark) = (get_u64(bytes, 0), get_u64(bytes, 8), get_u64(bytes, 16));
        if copy == frame {
            return Err(format!("copy-out of block {frame} onto itself"));
        }
        if watermark == 0 {
            return Err(format!("copy-out of block {frame} for no snapshot"));
        }
        Ok((copy, Self { frame, watermark }))
    }
}

/// An entry of the segment usage table (key: the segment's first data
/// block): how many of its blocks are in use (by the active tree or by
/// snapshots) as of the CP, and when the segment was last written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentUsageRecord {
    /// Blocks in the segment.
    pub block_count: u32,
    /// Blocks in use: set in the activemap or the summary map.
    pub live_blocks: u32,
    /// The segment clock when the segment was last written (0: never).
    pub age: u64,
}

impl TreeEntry for SegmentUsageRecord {
    const SIZE: usize = 24;
    const KIND: BlockKind = BlockKind::SegmentUsageNode;

    fn encode(&self, key: u64, out: &mut [u8]) {
        put_u64(out, 0, key);
        put_u32(out, 8, self.block_count);
        put_u32(out, 12, self.live_blocks);
        put_u64(out, 16, self.age);
    }

    fn decode(bytes: &[u8]) -> Result<(u64, Self), String> {
        let (first, block_count, live_blocks, age) =
            (get_u64(bytes, 0), get_u32(bytes, 8), get_u32(bytes, 12), get_u64(bytes, 16));
        if block_count == 0 || live_blocks > block_count {
            return Err(format!("segment at block {first}: {live_blocks} live blocks of {block_count}"));
        }
        Ok((first, Self { block_count, live_blocks, age }))
    }
}

/// Bits in one bitmap page.
pub const BITS_PER_PAGE: u64 = (BODY_SIZE * 8) as u64;
/// `u64` words in one bitmap page.
pub const WORDS_PER_PAGE: usize = BODY_SIZE / 8;
const _: () = assert!(BODY_SIZE.is_multiple_of(8));
const _: () = assert!(WORDS_PER_PAGE as u64 * 64 == BITS_PER_PAGE);
/// Bytes of one index entry of a page tree (u64 child block, u32 child crc32c).
pub const PAGE_INDEX_ENTRY_SIZE: usize = 12;
/// Children of one index node of a page tree (bitmaps, checksum tables).
pub const PAGE_INDEX_CAPACITY: usize = BODY_SIZE / PAGE_INDEX_ENTRY_SIZE;

/// Data checksums one [`LogRecord::Checksums`] record carries.
pub const CHECKSUMS_PER_RECORD: usize = 5;
const _: () = assert!(CHECKSUMS_PER_RECORD <= u8::MAX as usize);

/// One log record (32 bytes on disk).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogRecord {
    /// One logical block now lives in a flash block.
    Staged {
        /// The extent.
        extent_id: u64,
        /// The logical block.
        logical_block: u64,
        /// The flash block holding the data.
        flash_block: u64,
        /// crc32c of the 4 KiB of data.
        data_crc: u32,
    },
    /// A run of logical blocks now lives in consecutive data-device blocks
    /// written by a write (their checksums were logged before this record).
    Direct {
        /// The extent.
        extent_id: u64,
        /// The first logical block.
        logical_block: u64,
        /// Number of blocks.
        block_count: u32,
        /// The first data-device block.
        data_block: u64,
    },
    /// A run of logical blocks is now a hole.
    Unmap {
        /// The extent.
        extent_id: u64,
        /// The first logical block.
        logical_block: u64,
        /// Number of blocks.
        block_count: u32,
    },
    /// The checksums of consecutive data-device blocks just written.
    Checksums {
        /// The first block.
        first_data_block: u64,
        /// How many of `crcs` are used (1..=[`CHECKSUMS_PER_RECORD`]).
        count: u8,
        /// The crc32c of each block; unused ones are zero.
        crcs: [u32; CHECKSUMS_PER_RECORD],
    },
    /// A run of staged logical blocks moved to consecutive data-device blocks
    /// by destage: each keeps the checksum of its staged copy.
    Destaged {
        /// The extent.
        extent_id: u64,
        /// The first logical block.
        logical_block: u64,
        /// Number of blocks.
        block_count: u32,
        /// The first data-device block.
        data_block: u64,
    },
    /// Data-device writes are about to go to these write-intent regions
    /// (devices with redundancy: RAID stripes to resync after a crash).
    WriteIntent {
        /// The first region.
        first_region: u64,
        /// Number of regions.
        region_count: u32,
    },
    /// The in-place layout copied frame block `frame` out to `copy` for the
    /// snapshots up to `watermark` before overwriting it (a copy-out-table
    /// entry; the copy's checksum record precedes it).
    CopyOut {
        /// The frame block.
        frame: u64,
        /// The block holding the copy.
        copy: u64,
        /// The youngest snapshot id the copy serves.
        watermark: u64,
    },
}

/// Size of one encoded log record.
pub const LOG_RECORD_SIZE: usize = 32;
/// Offset of the first record in a log block: after the header, the slot of
/// the next block (16 bytes) and the flushed-through mark (8 bytes).
pub const LOG_RECORDS_OFFSET: usize = HEADER_SIZE + LogSlot::SIZE + 8;
/// Records per log block.
pub const LOG_RECORD_CAPACITY: usize = (BLOCK_SIZE - LOG_RECORDS_OFFSET) / LOG_RECORD_SIZE;

const _: () = assert!(LOG_RECORD_CAPACITY > 0);
const _: () = assert!(LOG_RECORD_CAPACITY <= u16::MAX as usize);

/// Record tags (docs/format.md, "Log record blocks").
mod record_tags {
    pub const STAGED: u8 = 1;
    pub const DIRECT: u8 = 2;
    pub const UNMAP: u8 = 3;
    pub const CHECKSUMS: u8 = 4;
    pub const DESTAGED: u8 = 5;
    pub const WRITE_INTENT: u8 = 6;
    pub const COPY_OUT: u8 = 7;
}

impl LogRecord {
    /// Checksum records for blocks from `first_data_block` on, one per
    /// [`CHECKSUMS_PER_RECORD`] blocks.
    pub fn checksums(first_data_block: u64, crcs: &[u32]) -> Vec<LogRecord> {
        crcs.chunks(CHECKSUMS_PER_RECORD)
            .zip((first_data_block..).step_by(CHECKSUMS_PER_RECORD))
            .map(|(chunk, first)| {
                let mut values = [0; CHECKSUMS_PER_RECORD];
                values[..chunk.len()].copy_from_slice(chunk);
                LogRecord::Checksums {
                    first_data_block: first,
                    count: u8::try_from(chunk.len()).expect("a chunk of at most five"),
                    crcs: values,
                }
            })
            .collect()
    }

    /// Writes the record into `out` (32 bytes).
    pub fn encode(&self, out: &mut [u8]) {
        use record_tags as tag;
        out[..LOG_RECORD_SIZE].fill(0);
        match *self {
            LogRecord::Staged { extent_id, logical_block, flash_block, data_crc } => {
                encode_mapping(out, tag::STAGED, data_crc, extent_id, logical_block, flash_block)
            }
            LogRecord::Direct { extent_id, logical_block, block_count, data_block } => {
                encode_mapping(out, tag::DIRECT, block_count, extent_id, logical_block, data_block)
            }
            LogRecord::Unmap { extent_id, logical_block, block_count } => {
                encode_mapping(out, tag::UNMAP, block_count, extent_id, logical_block, 0)
            }
            LogRecord::Destaged { extent_id, logical_block, block_count, data_block } => {
                encode_mapping(out, tag::DESTAGED, block_count, extent_id, logical_block, data_block)
            }
            LogRecord::Checksums { first_data_block, count, crcs } => {
                out[0] = tag::CHECKSUMS;
                out[1] = count;
                put_u32(out, 4, crcs[0]);
                put_u64(out, 8, first_data_block);
                for (index, &crc) in crcs[1..].iter().enumerate() {
                    put_u32(out, 16 + index * 4, crc);
                }
            }
            LogRecord::WriteIntent { first_region, region_count } => {
                out[0] = tag::WRITE_INTENT;
                put_u32(out, 4, region_count);
                put_u64(out, 8, first_region);
            }
            LogRecord::CopyOut { frame, copy, watermark } => {
                out[0] = tag::COPY_OUT;
                put_u64(out, 8, frame);
                put_u64(out, 16, copy);
                put_u64(out, 24, watermark);
            }
        }
    }

    /// Reads a record from `bytes` (32 bytes).
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        use record_tags as tag;
        let word = get_u32(bytes, 4);
        let extent_id = get_u64(bytes, 8);
        let logical_block = get_u64(bytes, 16);
        let target = get_u64(bytes, 24);
        let nonzero_count = || if word > 0 { Ok(word) } else { Err("record of zero blocks".to_string()) };
        match bytes[0] {
            tag::STAGED => Ok(LogRecord::Staged { extent_id, logical_block, flash_block: target, data_crc: word }),
            tag::DIRECT => {
                Ok(LogRecord::Direct { extent_id, logical_block, block_count: nonzero_count()?, data_block: target })
            }
            tag::UNMAP => Ok(LogRecord::Unmap { extent_id, logical_block, block_count: nonzero_count()? }),
            tag::DESTAGED => {
                Ok(LogRecord::Destaged { extent_id, logical_block, block_count: nonzero_count()?, data_block: target })
            }
            tag::CHECKSUMS => decode_checksums(bytes),
            tag::WRITE_INTENT => Ok(LogRecord::WriteIntent { first_region: extent_id, region_count: nonzero_count()? }),
            tag::COPY_OUT => {
                let (frame, copy, watermark) = (extent_id, logical_block, target);
                if frame == copy || watermark == 0 {
                    return Err(format!("copy-out record of block {frame} to {copy} for snapshot {watermark}"));
                }
                Ok(LogRecord::CopyOut { frame, copy, watermark })
            }
            other => Err(format!("unknown log record tag {other}")),
        }
    }
}

fn encode_mapping(out: &mut [u8], tag: u8, word: u32, extent_id: u64, logical_block: u64, target: u64) {
    out[0] = tag;
    put_u32(out, 4, word);
    put_u64(out, 8, extent_id);
    put_u64(out, 16, logical_block);
    put_u64(out, 24, target);
}

/// The low and high halves of `value`.
fn split_u64(value: u64) -> [u32; 2] {
    let bytes = value.to_le_bytes();
    [
        u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]),
        u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]),
    ]
}

fn decode_checksums(bytes: &[u8]) -> Result<LogRecord, String> {
    let count = bytes[1];
    if !(1..=CHECKSUMS_PER_RECORD).contains(&usize::from(count)) {
        return Err(format!("checksum record of {count} checksums"));
    }
    let mut crcs = [0; CHECKSUMS_PER_RECORD];
    crcs[0] = get_u32(bytes, 4);
    for (index, crc) in crcs[1..].iter_mut().enumerate() {
        *crc = get_u32(bytes, 16 + index * 4);
    }
    if crcs[usize::from(count)..].iter().any(|&crc| crc != 0) {
        return Err("checksum record with values past its count".into());
    }
    let first_data_block = get_u64(bytes, 8);
    if first_data_block.checked_add(u64::from(count)).is_none() {
        return Err("checksum record beyond any device".into());
    }
    Ok(LogRecord::Checksums { first_data_block, count, crcs })
}

/// A decoded log record block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogBlock {
    /// Header fields (generation, mount count in `owner`, sequence in `key`).
    pub header: Header,
    /// Where the next log record block goes.
    pub next: LogSlot,
    /// The sequence number of the last log block a completed flush had made
    /// durable when this one was written (`None`: no flush had completed in
    /// this epoch). Every block up to it, and the data its records name, was
    /// acknowledged as durable.
    pub flushed_through: Option<u64>,
    /// The records, in order.
    pub records: Vec<LogRecord>,
}

/// Encodes a sealed log record block.
pub fn encode_log_block(
    header: &Header,
    next: LogSlot,
    flushed_through: Option<u64>,
    records: &[LogRecord],
) -> Vec<u8> {
    assert!(records.len() <= LOG_RECORD_CAPACITY, "log block overfilled");
    let mut header = *header;
    header.kind = BlockKind::LogBlock;
    header.entry_count = u16::try_from(records.len()).expect("a log block's records fit its count");
    let mut block = new_block(&header);
    next.encode(&mut block, HEADER_SIZE);
    put_u64(&mut block, HEADER_SIZE + LogSlot::SIZE, flushed_through.map_or(0, |sequence| sequence + 1));
    for (index, record) in records.iter().enumerate() {
        let offset = LOG_RECORDS_OFFSET + index * LOG_RECORD_SIZE;
        record.encode(&mut block[offset..offset + LOG_RECORD_SIZE]);
    }
    seal_block(&mut block);
    block
}

/// Decodes and verifies a log record block.
pub fn decode_log_block(block: &[u8]) -> Result<LogBlock, String> {
    let header = decode_header(block)?;
    if header.kind != BlockKind::LogBlock {
        return Err(format!("holds a {}, not a log record block", header.kind.name()));
    }
    let count = header.entry_count as usize;
    if count > LOG_RECORD_CAPACITY {
        return Err(format!("{count} records exceed the capacity {LOG_RECORD_CAPACITY}"));
    }
    let flushed_mark = get_u64(block, HEADER_SIZE + LogSlot::SIZE);
    let flushed_through = flushed_mark.checked_sub(1);
    if flushed_through.is_some_and(|sequence| sequence >= header.key) {
        return Err(format!("flushed through {flushed_mark} from block {}", header.key));
    }
    let records = (0..count)
        .map(|index| {
            let offset = LOG_RECORDS_OFFSET + index * LOG_RECORD_SIZE;
            LogRecord::decode(&block[offset..offset + LOG_RECORD_SIZE])
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(LogBlock { header, next: LogSlot::decode(block, HEADER_SIZE), flushed_through, records })
}

/// Decodes the index entries of a tree index node: (first key, child block, child crc).
pub fn decode_index_entries(block: &[u8], count: usize) -> Result<Vec<(u64, u64, u32)>, String> {
    if count > INDEX_CAPACITY {
        return Err(format!("{count} index entries exceed the capacity {INDEX_CAPACITY}"));
    }
    Ok((0..count)
        .map(|index| {
            let offset = HEADER_SIZE + index * INDEX_ENTRY_SIZE;
            (get_u64(block, offset), get_u64(block, offset + 8), get_u32(block, offset + 16))
        })
        .collect())
}

/// Writes one index entry.
pub fn encode_index_entry(block: &mut [u8], index: usize, first_key: u64, child: u64, child_crc: u32) {
    let offset = HEADER_SIZE + index * INDEX_ENTRY_SIZE;
    put_u64(block, offset, first_key);
    put_u64(block, offset + 8, child);
    put_u32(block, offset + 16, child_crc);
}

/// Decodes the leaf entries of a tree node.
pub fn decode_leaf_entries<E: TreeEntry>(block: &[u8], count: usize) -> Result<Vec<(u64, E)>, String> {
    if count > leaf_capacity(E::SIZE) {
        return Err(format!("{count} entries exceed the capacity {}", leaf_capacity(E::SIZE)));
    }
    (0..count)
        .map(|index| {
            let offset = HEADER_SIZE + index * E::SIZE;
            E::decode(&block[offset..offset + E::SIZE])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn superblock_round_trips_and_rejects_a_flipped_bit() {
        let superblock = Superblock {
            volume_id: 7,
            generation: 9,
            data_block_count: 100,
            flash_block_count: 50,
            mount_count: 3,
            next_extent_id: 4,
            next_snapshot_id: 5,
            log_head: LogSlot { primary: 12, mirror: 13 },
            flags: SUPERBLOCK_FLAG_DATA_CHECKSUMS | SUPERBLOCK_FLAG_DELETE_LOG_BATCHED,
            roots: RootSet {
                extent_table: TreePointer { block: 3, crc: 0xdead, height: 1 },
                flash_checksums: TreePointer { block: 9, crc: 0xbeef, height: 2 },
                copy_outs: TreePointer { block: 11, crc: 0xfeed, height: 1 },
                segment_usage: TreePointer { block: 15, crc: 0xbead, height: 1 },
                refcounts: TreePointer { block: 14, crc: 0xcafe, height: 1 },
                ..RootSet::default()
            },
            delete_log: TreePointer { block: 17, crc: 0xcafe, height: 1 },
            unordered_below_snapshot_id: 6,
        };
        let mut block = superblock.encode();
        assert_eq!(Superblock::decode(&block).unwrap(), superblock);
        assert!(block[512..].iter().all(|&byte| byte == 0), "the fields fit the first sector");
        block[200] ^= 4;
        assert!(Superblock::decode(&block).unwrap_err().contains("checksum"));
    }

    #[test]
    fn log_block_round_trips() {
        let header = Header {
            kind: BlockKind::LogBlock,
            level: 0,
            entry_count: 0,
            volume_id: 1,
            owner: 2,
            generation: 3,
            key: 4,
        };
        let records = vec![
            LogRecord::Staged { extent_id: 1, logical_block: 2, flash_block: 3, data_crc: 4 },
            LogRecord::Direct { extent_id: 1, logical_block: 9, block_count: 60, data_block: 1000 },
            LogRecord::Unmap { extent_id: 2, logical_block: 0, block_count: 7 },
            LogRecord::Destaged { extent_id: 3, logical_block: 5, block_count: 2, data_block: 40 },
            LogRecord::WriteIntent { first_region: 6, region_count: 2 },
            LogRecord::CopyOut { frame: 40, copy: 900, watermark: 3 },
        ];
        let mut records = records;
        records.extend(LogRecord::checksums(500, &[1, 2, 3, 4, 5, 6, 7]));
        assert_eq!(records.len(), 8, "seven checksums take two records");
        let next = LogSlot { primary: 77, mirror: 78 };
        let block = encode_log_block(&header, next, Some(2), &records);
        let decoded = decode_log_block(&block).unwrap();
        assert_eq!(decoded.next, next);
        assert_eq!(decoded.flushed_through, Some(2));
        assert_eq!(decoded.records, records);
        assert_eq!(decoded.header.key, 4);
        let unflushed = decode_log_block(&encode_log_block(&header, next, None, &[])).unwrap();
        assert_eq!(unflushed.flushed_through, None);
    }

    #[test]
    fn a_run_is_twelve_bytes_and_keeps_a_flash_location_and_the_longest_count() {
        assert_eq!(std::mem::size_of::<Run>(), 12);
        let run = Run::new(Run::MAX_BLOCKS, FLASH_LOCATION_BIT | (5 << 32) | 7);
        assert_eq!((run.count(), run.location()), (u64::from(u32::MAX), FLASH_LOCATION_BIT | (5 << 32) | 7));
        let mut bytes = [0u8; Run::SIZE];
        run.encode(42, &mut bytes);
        assert_eq!(Run::decode(&bytes), Ok((42, run)));
    }

    #[test]
    fn records_round_trip() {
        let extent = ExtentRecord {
            name: "lun0".into(),
            size_bytes: 8192,
            map: TreePointer { block: 5, crc: 6, height: 2 },
            created_generation: 3,
            reservation: None,
        };
        let mut bytes = vec![0; ExtentRecord::SIZE];
        extent.encode(42, &mut bytes);
        assert_eq!(ExtentRecord::decode(&bytes).unwrap(), (42, extent.clone()));
        let reserved = ExtentRecord {
            name: "n".repeat(64),
            reservation: Some(RangeReservation { first_range: u64::MAX - 7, range_count: u64::from(u32::MAX) }),
            ..extent
        };
        let mut bytes = vec![0; ExtentRecord::SIZE];
        reserved.encode(43, &mut bytes);
        assert_eq!(ExtentRecord::decode(&bytes).unwrap(), (43, reserved));
        let snapshot = SnapshotRecord {
            name: "s".repeat(64),
            generation: 8,
            state: SnapshotState::Deleting,
            scan_cursor: 3,
            log_head: LogSlot { primary: 99, mirror: 100 },
            roots: RootSet { flash_checksums: TreePointer { block: 1, crc: 2, height: 0 }, ..RootSet::default() },
        };
        let mut bytes = vec![0; SnapshotRecord::SIZE];
        snapshot.encode(5, &mut bytes);
        assert_eq!(SnapshotRecord::decode(&bytes).unwrap(), (5, snapshot));
    }
}

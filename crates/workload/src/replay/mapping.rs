//! From a trace's addresses to the target's: devices, block rounding, and
//! requests beyond the target.
//!
//! Steps, in order, each an explicit option with a default:
//!
//! 1. **Device filter** (`only_device`, default none): requests of other
//!    devices are skipped.
//! 2. **Device map** ([`DeviceMap`], default [`DeviceMap::Shared`]): every
//!    device addresses the whole target (their addresses overlap); or
//!    [`DeviceMap::Split`]: the target is cut into `n` equal slices (whole
//!    blocks) and device `d` gets slice `d mod n`.
//! 3. **Block rounding** (`block_bytes`, default 512): the start is rounded
//!    down and the end up to a multiple of the block size.
//! 4. **Out of range** ([`OutOfRange`], default [`OutOfRange::Wrap`]): a
//!    request that ends beyond its slice is wrapped (its start taken modulo the
//!    slice, then moved back so it ends within it), skipped, or an error naming
//!    its line.
//!
//! Requests of no length (other than flushes) are skipped; so are operations
//! the target cannot perform (the disk model has no trim or flush).

use crate::request::{Operation, TraceRequest};

/// How trace devices share the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceMap {
    /// Every device addresses the whole target.
    Shared,
    /// The target is cut into this many equal slices; device `d` gets slice `d mod n`.
    Split(u64),
}

/// What happens to a request that ends beyond its slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutOfRange {
    /// Its start is taken modulo the slice, then moved back to end within it.
    Wrap,
    /// It is skipped (and counted).
    Skip,
    /// The replay stops with an error naming the line.
    Error,
}

/// The mapping options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MappingOptions {
    /// Replay only this device's requests.
    pub only_device: Option<u64>,
    /// How devices share the target.
    pub device_map: DeviceMap,
    /// Rounding unit, in bytes (a positive multiple of 512).
    pub block_bytes: u64,
    /// What to do beyond the slice.
    pub out_of_range: OutOfRange,
}

impl Default for MappingOptions {
    fn default() -> Self {
        MappingOptions {
            only_device: None,
            device_map: DeviceMap::Shared,
            block_bytes: 512,
            out_of_range: OutOfRange::Wrap,
        }
    }
}

/// A request as the target receives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetRequest {
    /// Read, write, trim or flush.
    pub operation: Operation,
    /// First byte (a multiple of the block size).
    pub offset_bytes: u64,
    /// Bytes (a multiple of the block size; 0 for a flush).
    pub length_bytes: u64,
}

/// Why a request is not replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SkipReason {
    /// Another device than `only_device`.
    OtherDevice,
    /// No bytes addressed.
    Empty,
    /// Beyond the target, under [`OutOfRange::Skip`].
    OutOfRange,
    /// The target cannot perform this operation.
    Unsupported,
    /// Longer than the target takes in one request, or than a whole slice.
    TooLong,
}

impl SkipReason {
    /// Every reason, in report order.
    pub const ALL: [SkipReason; 5] = [
        SkipReason::OtherDevice,
        SkipReason::Empty,
        SkipReason::OutOfRange,
        SkipReason::Unsupported,
        SkipReason::TooLong,
    ];

    /// The name the report uses.
    pub fn name(self) -> &'static str {
        match self {
            SkipReason::OtherDevice => "other_device",
            SkipReason::Empty => "empty",
            SkipReason::OutOfRange => "out_of_range",
            SkipReason::Unsupported => "unsupported",
            SkipReason::TooLong => "too_long",
        }
    }
}

/// The result of mapping one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mapped {
    /// Replay it so.
    Issue(TargetRequest),
    /// Do not replay it.
    Skip(SkipReason),
    /// Out of range under [`OutOfRange::Error`]: the first and end byte of the
    /// rounded request and the slice's size.
    OutOfRange {
        /// First byte after rounding.
        offset_bytes: u64,
        /// One past the last byte after rounding.
        end_bytes: u64,
        /// Bytes of the device's slice.
        slice_bytes: u64,
    },
}

/// What the target can do, as the mapping needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetShape {
    /// Bytes addressable.
    pub capacity_bytes: u64,
    /// Longest request it takes.
    pub request_bytes_max: u64,
    /// Whether it performs trims.
    pub trims: bool,
    /// Whether it performs flushes.
    pub flushes: bool,
}

/// The mapping of one replay.
#[derive(Debug, Clone, Copy)]
pub struct Mapping {
    options: MappingOptions,
    shape: TargetShape,
    slice_bytes: u64,
}

impl Mapping {
    /// The mapping onto a target of `shape`; an error when a slice would hold
    /// no block.
    pub fn new(options: MappingOptions, shape: TargetShape) -> Result<Mapping, String> {
        let block = options.block_bytes;
        if block == 0 || !block.is_multiple_of(512) {
            return Err(format!("block size {block} is not a positive multiple of 512 bytes"));
        }
        let slices = match options.device_map {
            DeviceMap::Shared => 1,
            DeviceMap::Split(0) => return Err("a split into 0 slices".into()),
            DeviceMap::Split(slices) => slices,
        };
        let slice_bytes = shape.capacity_bytes / slices / block * block;
        if slice_bytes == 0 {
            return Err(format!(
                "{} bytes of target in {slices} slices leave no whole {block}-byte block per slice",
                shape.capacity_bytes
            ));
        }
        Ok(Mapping { options, shape, slice_bytes })
    }

    /// Bytes of each device's slice.
    pub fn slice_bytes(&self) -> u64 {
        self.slice_bytes
    }

    /// Maps one request.
    pub fn map(&self, request: &TraceRequest) -> Mapped {
        if self.options.only_device.is_some_and(|device| device != request.device) {
            return Mapped::Skip(SkipReason::OtherDevice);
        }
        let supported = match request.operation {
            Operation::Read | Operation::Write => true,
            Operation::Trim => self.shape.trims,
            Operation::Flush => self.shape.flushes,
        };
        if !supported {
            return Mapped::Skip(SkipReason::Unsupported);
        }
        if request.operation == Operation::Flush {
            return Mapped::Issue(TargetRequest { operation: Operation::Flush, offset_bytes: 0, length_bytes: 0 });
        }
        if request.length_bytes == 0 {
            return Mapped::Skip(SkipReason::Empty);
        }
        let block = self.options.block_bytes;
        let start = request.offset_bytes / block * block;
        let end = request.end_bytes().div_ceil(block).saturating_mul(block);
        let length = end - start;
        if length > self.slice_bytes || length > self.shape.request_bytes_max {
            return Mapped::Skip(SkipReason::TooLong);
        }
        let start = if end <= self.slice_bytes {
            start
        } else {
            match self.options.out_of_range {
                OutOfRange::Wrap => (start % self.slice_bytes).min(self.slice_bytes - length),
                OutOfRange::Skip => return Mapped::Skip(SkipReason::OutOfRange),
                OutOfRange::Error => {
                    return Mapped::OutOfRange { offset_bytes: start, end_bytes: end, slice_bytes: self.slice_bytes }
                }
            }
        };
        let slice = match self.options.device_map {
            DeviceMap::Shared => 0,
            DeviceMap::Split(slices) => request.device % slices,
        };
        Mapped::Issue(TargetRequest {
            operation: request.operation,
            offset_bytes: slice * self.slice_bytes + start,
            length_bytes: length,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: TargetShape =
        TargetShape { capacity_bytes: 1 << 20, request_bytes_max: 1 << 16, trims: false, flushes: false };

    fn request(device: u64, offset_bytes: u64, length_bytes: u64) -> TraceRequest {
        TraceRequest {
            line_number: 1,
            issue_ns: 0,
            device,
            operation: Operation::Read,
            offset_bytes,
            length_bytes,
            response_ns: None,
        }
    }

    fn issued(mapped: Mapped) -> (u64, u64) {
        match mapped {
            Mapped::Issue(request) => (request.offset_bytes, request.length_bytes),
            other => panic!("not issued: {other:?}"),
        }
    }

    #[test]
    fn rounding_covers_the_request() {
        let options = MappingOptions { block_bytes: 4096, ..MappingOptions::default() };
        let mapping = Mapping::new(options, SHAPE).unwrap();
        assert_eq!(issued(mapping.map(&request(0, 5000, 100))), (4096, 4096));
        assert_eq!(issued(mapping.map(&request(0, 4000, 200))), (0, 8192));
    }

    #[test]
    fn out_of_range_wraps_skips_or_fails() {
        let wrap = Mapping::new(MappingOptions::default(), SHAPE).unwrap();
        assert_eq!(issued(wrap.map(&request(0, (1 << 20) + 1024, 512))), (1024, 512));
        assert_eq!(issued(wrap.map(&request(0, (2 << 20) - 512, 1024))), ((1 << 20) - 1024, 1024), "moved back to fit");
        let skip = Mapping::new(MappingOptions { out_of_range: OutOfRange::Skip, ..MappingOptions::default() }, SHAPE)
            .unwrap();
        assert_eq!(skip.map(&request(0, 1 << 20, 512)), Mapped::Skip(SkipReason::OutOfRange));
        let error =
            Mapping::new(MappingOptions { out_of_range: OutOfRange::Error, ..MappingOptions::default() }, SHAPE)
                .unwrap();
        assert!(matches!(error.map(&request(0, 1 << 20, 512)), Mapped::OutOfRange { .. }));
        assert_eq!(wrap.map(&request(0, 0, 1 << 17)), Mapped::Skip(SkipReason::TooLong));
    }

    #[test]
    fn devices_share_split_or_filter() {
        let split =
            Mapping::new(MappingOptions { device_map: DeviceMap::Split(4), ..MappingOptions::default() }, SHAPE)
                .unwrap();
        assert_eq!(split.slice_bytes(), 1 << 18);
        assert_eq!(issued(split.map(&request(6, 512, 512))), (2 * (1 << 18) + 512, 512));
        let only = Mapping::new(MappingOptions { only_device: Some(3), ..MappingOptions::default() }, SHAPE).unwrap();
        assert_eq!(only.map(&request(2, 0, 512)), Mapped::Skip(SkipReason::OtherDevice));
        assert_eq!(issued(only.map(&request(3, 0, 512))), (0, 512));
        assert_eq!(only.map(&request(3, 0, 0)), Mapped::Skip(SkipReason::Empty));
        let mut trim = request(3, 0, 512);
        trim.operation = Operation::Trim;
        assert_eq!(only.map(&trim), Mapped::Skip(SkipReason::Unsupported));
    }
}

//! Pure request validation: the one place a request is checked against the
//! protocol and the attached export, so that exports only see valid requests
//! (what [`crate::backend`] lets them assert), and the memory a valid request
//! reserves.

use super::{BASE_ALLOCATION, BLOCK_STATUS_DESCRIPTORS_MAX, MAXIMUM_PAYLOAD_BYTES, MINIMUM_BLOCK_BYTES};
use crate::protocol::transmission::*;
use crate::protocol::Errno;

/// What the validator needs to know about the attached export.
#[derive(Debug, Clone, Copy)]
pub struct RequestLimits {
    /// Export size in bytes.
    pub size_bytes: u64,
    /// Whether the export is read-only.
    pub read_only: bool,
    /// Whether structured replies were negotiated.
    pub structured_replies: bool,
    /// Whether `base:allocation` was selected for this export.
    pub block_status: bool,
}

/// The validator's decision on one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Valid: execute it.
    Execute(Command),
    /// Invalid: answer with this error (a write's payload is read and dropped).
    Reject(Rejection),
    /// `NBD_CMD_DISC`: finish the requests in flight and close.
    Disconnect,
    /// The connection cannot continue (e.g. a write payload beyond the maximum,
    /// which the server will not read).
    HardDisconnect(String),
}

/// An error reply to an invalid request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The NBD error value.
    pub errno: Errno,
    /// Why, for the log and the structured error message.
    pub reason: String,
}

fn reject(errno: Errno, reason: String) -> Verdict {
    Verdict::Reject(Rejection { errno, reason })
}

/// Validates a request against the protocol and the attached export: the one place
/// bad requests are caught, so that exports only see valid ones.
pub fn validate_request(header: &RequestHeader, limits: &RequestLimits) -> Verdict {
    let Some(command) = header.command() else {
        return reject(Errno::Inval, format!("unknown command {}", header.command_code));
    };
    let name = command.name();
    let length = header.length_bytes;
    if command == Command::Write && length > MAXIMUM_PAYLOAD_BYTES {
        return Verdict::HardDisconnect(format!("{name} payload of {length} bytes exceeds {MAXIMUM_PAYLOAD_BYTES}"));
    }
    if command == Command::Disconnect {
        return Verdict::Disconnect;
    }
    let allowed_flags = COMMAND_FLAG_FUA
        | match command {
            Command::Read if limits.structured_replies => COMMAND_FLAG_DF,
            Command::WriteZeroes => COMMAND_FLAG_NO_HOLE | COMMAND_FLAG_FAST_ZERO,
            Command::BlockStatus => COMMAND_FLAG_REQ_ONE,
            _ => 0,
        };
    if header.flags & !allowed_flags != 0 {
        return reject(Errno::Inval, format!("{name} with invalid flags {:#x}", header.flags & !allowed_flags));
    }
    match command {
        Command::Flush if header.offset_bytes != 0 || length != 0 => {
            return reject(Errno::Inval, format!("{name} with nonzero offset or length"));
        }
        Command::Flush => return Verdict::Execute(command),
        Command::BlockStatus if !limits.block_status => {
            return reject(Errno::Inval, format!("{name} without the {BASE_ALLOCATION} context negotiated"));
        }
        Command::BlockStatus if length == 0 => return reject(Errno::Inval, format!("{name} of length 0")),
        Command::Read if length > MAXIMUM_PAYLOAD_BYTES => {
            let errno = if limits.structured_replies { Errno::Overflow } else { Errno::Inval };
            return reject(errno, format!("{name} of {length} bytes exceeds {MAXIMUM_PAYLOAD_BYTES}"));
        }
        _ => {}
    }
    let minimum = u64::from(MINIMUM_BLOCK_BYTES);
    if !header.offset_bytes.is_multiple_of(minimum) || !u64::from(length).is_multiple_of(minimum) {
        return reject(
            Errno::Inval,
            format!("{name} at offset {} length {length} not aligned to {minimum} bytes", header.offset_bytes),
        );
    }
    let writes = matches!(command, Command::Write | Command::Trim | Command::WriteZeroes);
    if writes && limits.read_only {
        return reject(Errno::Perm, format!("{name} on a read-only export"));
    }
    let end = header.offset_bytes.checked_add(u64::from(length));
    if end.is_none_or(|end| end > limits.size_bytes) {
        let errno = if matches!(command, Command::Write | Command::WriteZeroes) { Errno::NoSpc } else { Errno::Inval };
        return reject(
            errno,
            format!(
                "{name} at offset {} length {length} beyond export size {}",
                header.offset_bytes, limits.size_bytes
            ),
        );
    }
    Verdict::Execute(command)
}

/// Memory reserved for every request besides its data: the request and reply
/// headers and an error message (at most 4096 bytes, as the protocol allows).
pub const REQUEST_OVERHEAD_BYTES: u64 = 8 << 10;

/// Bytes of the budgets a request holds from before its payload is read until
/// its reply is sent: its payload or its reply data (a read's data, a block
/// status reply's descriptors), plus [`REQUEST_OVERHEAD_BYTES`].
pub fn reservation_bytes(header: &RequestHeader, command: Command) -> u64 {
    let data_bytes = match command {
        Command::Read | Command::Write => u64::from(header.length_bytes),
        Command::BlockStatus => {
            BLOCK_STATUS_DESCRIPTOR_BYTES * block_status_descriptors_max(header.length_bytes) as u64
        }
        _ => 0,
    };
    REQUEST_OVERHEAD_BYTES + data_bytes
}

/// Bytes of one block status descriptor on the wire.
pub(super) const BLOCK_STATUS_DESCRIPTOR_BYTES: u64 = 8;

/// The most descriptors a block status reply of `length_bytes` carries: one per
/// minimum block at most, and never more than [`BLOCK_STATUS_DESCRIPTORS_MAX`].
pub(super) fn block_status_descriptors_max(length_bytes: u32) -> usize {
    (length_bytes.div_ceil(MINIMUM_BLOCK_BYTES) as usize).clamp(1, BLOCK_STATUS_DESCRIPTORS_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: RequestLimits =
        RequestLimits { size_bytes: 1 << 20, read_only: false, structured_replies: true, block_status: true };

    fn request(command: Command, flags: u16, offset_bytes: u64, length_bytes: u32) -> RequestHeader {
        RequestHeader { flags, command_code: command.code(), cookie: 1, offset_bytes, length_bytes }
    }

    fn errno_of(verdict: Verdict) -> Errno {
        match verdict {
            Verdict::Reject(rejection) => rejection.errno,
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    #[test]
    fn valid_requests_execute() {
        for command in [Command::Read, Command::Write, Command::Trim, Command::WriteZeroes, Command::BlockStatus] {
            assert_eq!(validate_request(&request(command, 0, 4096, 4096), &LIMITS), Verdict::Execute(command));
        }
        let zero_flags = COMMAND_FLAG_NO_HOLE | COMMAND_FLAG_FAST_ZERO | COMMAND_FLAG_FUA;
        let zeroes = request(Command::WriteZeroes, zero_flags, 0, 1 << 20);
        assert_eq!(validate_request(&zeroes, &LIMITS), Verdict::Execute(Command::WriteZeroes));
        assert_eq!(validate_request(&request(Command::Flush, 0, 0, 0), &LIMITS), Verdict::Execute(Command::Flush));
        assert_eq!(validate_request(&request(Command::Disconnect, 0, 0, 0), &LIMITS), Verdict::Disconnect);
    }

    #[test]
    fn out_of_range_requests_get_the_errno_the_protocol_names() {
        assert_eq!(errno_of(validate_request(&request(Command::Read, 0, 1 << 20, 512), &LIMITS)), Errno::Inval);
        assert_eq!(errno_of(validate_request(&request(Command::Trim, 0, 1 << 20, 512), &LIMITS)), Errno::Inval);
        assert_eq!(errno_of(validate_request(&request(Command::Write, 0, 1 << 20, 512), &LIMITS)), Errno::NoSpc);
        let zeroes = request(Command::WriteZeroes, 0, (1 << 20) - 512, 1024);
        assert_eq!(errno_of(validate_request(&zeroes, &LIMITS)), Errno::NoSpc);
        let wrapping = request(Command::Read, 0, u64::MAX - 511, 1024);
        assert_eq!(errno_of(validate_request(&wrapping, &LIMITS)), Errno::Inval);
    }

    #[test]
    fn misaligned_requests_are_einval() {
        assert_eq!(errno_of(validate_request(&request(Command::Read, 0, 100, 512), &LIMITS)), Errno::Inval);
        assert_eq!(errno_of(validate_request(&request(Command::Write, 0, 512, 100), &LIMITS)), Errno::Inval);
    }

    #[test]
    fn oversized_requests() {
        let big = MAXIMUM_PAYLOAD_BYTES + 512;
        let large = RequestLimits { size_bytes: 1 << 40, ..LIMITS };
        assert_eq!(errno_of(validate_request(&request(Command::Read, 0, 0, big), &large)), Errno::Overflow);
        let simple = RequestLimits { structured_replies: false, ..large };
        assert_eq!(errno_of(validate_request(&request(Command::Read, 0, 0, big), &simple)), Errno::Inval);
        assert!(matches!(validate_request(&request(Command::Write, 0, 0, big), &large), Verdict::HardDisconnect(_)));
        // Commands without payload may exceed the maximum payload.
        assert_eq!(validate_request(&request(Command::Trim, 0, 0, big), &large), Verdict::Execute(Command::Trim));
    }

    #[test]
    fn writes_to_read_only_exports_are_eperm() {
        let read_only = RequestLimits { read_only: true, ..LIMITS };
        for command in [Command::Write, Command::Trim, Command::WriteZeroes] {
            assert_eq!(errno_of(validate_request(&request(command, 0, 0, 512), &read_only)), Errno::Perm);
        }
        assert_eq!(validate_request(&request(Command::Read, 0, 0, 512), &read_only), Verdict::Execute(Command::Read));
    }

    #[test]
    fn unknown_commands_and_flags_are_einval() {
        let unknown = RequestHeader { flags: 0, command_code: 42, cookie: 1, offset_bytes: 0, length_bytes: 0 };
        assert_eq!(errno_of(validate_request(&unknown, &LIMITS)), Errno::Inval);
        assert_eq!(
            errno_of(validate_request(&request(Command::Write, COMMAND_FLAG_NO_HOLE, 0, 512), &LIMITS)),
            Errno::Inval
        );
        assert_eq!(errno_of(validate_request(&request(Command::Read, 1 << 9, 0, 512), &LIMITS)), Errno::Inval);
        let simple = RequestLimits { structured_replies: false, ..LIMITS };
        assert_eq!(errno_of(validate_request(&request(Command::Read, COMMAND_FLAG_DF, 0, 512), &simple)), Errno::Inval);
    }

    #[test]
    fn block_status_needs_a_context_and_flush_needs_zero_range() {
        let no_context = RequestLimits { block_status: false, ..LIMITS };
        assert_eq!(errno_of(validate_request(&request(Command::BlockStatus, 0, 0, 512), &no_context)), Errno::Inval);
        assert_eq!(errno_of(validate_request(&request(Command::BlockStatus, 0, 0, 0), &LIMITS)), Errno::Inval);
        assert_eq!(errno_of(validate_request(&request(Command::Flush, 0, 512, 0), &LIMITS)), Errno::Inval);
    }
}

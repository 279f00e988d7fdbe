//! Executing a valid request on the export and encoding its reply: the one
//! place an export is called in the transmission phase. A panic of the export
//! becomes an `EIO` reply; a buffer that cannot be allocated, an `ENOMEM` one.
//! Replies are whole encoded byte strings, so that they never interleave.

use std::panic::{catch_unwind, AssertUnwindSafe};

use tracing::{error, warn};

use super::validate::block_status_descriptors_max;
use super::BASE_ALLOCATION_CONTEXT_ID;
use crate::backend::{Export, StatusExtent, ZeroOptions};
use crate::buffers::{BufferRecycler, RequestBuffer};
use crate::protocol::transmission::*;
use crate::protocol::Errno;

/// Longest error message sent in a structured error reply (the protocol's limit).
const ERROR_MESSAGE_BYTES_MAX: usize = 4096;

/// A validated request ready to execute, with a write's payload.
pub(super) struct Work {
    pub(super) header: RequestHeader,
    pub(super) command: Command,
    pub(super) payload: RequestBuffer,
}

/// An encoded reply, every byte of `buffer`.
#[derive(Debug)]
pub(super) struct ReplyBytes {
    pub(super) buffer: RequestBuffer,
}

impl ReplyBytes {
    pub(super) fn whole(buffer: impl Into<RequestBuffer>) -> Self {
        Self { buffer: buffer.into() }
    }

    pub(super) fn as_slice(&self) -> &[u8] {
        &self.buffer
    }
}

/// What executing a request needs besides the export.
pub(super) struct ExecutionContext<'a> {
    pub(super) structured: bool,
    pub(super) connection: &'a str,
    pub(super) buffers: &'a BufferRecycler,
}

/// The error reply to a request.
pub(super) fn error_reply(cookie: u64, errno: Errno, message: &str, structured: bool) -> ReplyBytes {
    if !structured {
        return ReplyBytes::whole(encode_simple_reply(cookie, errno.code()).to_vec());
    }
    let mut end = message.len().min(ERROR_MESSAGE_BYTES_MAX);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    let chunk = StructuredChunk {
        flags: REPLY_FLAG_DONE,
        cookie,
        payload: ChunkPayload::Error { error: errno.code(), message: message[..end].to_owned() },
    };
    ReplyBytes::whole(chunk.encode())
}

pub(super) fn out_of_memory_reply(header: &RequestHeader, structured: bool) -> ReplyBytes {
    error_reply(header.cookie, Errno::NoMem, "the server could not allocate the request's buffer", structured)
}

fn success_reply(cookie: u64) -> ReplyBytes {
    // A simple reply is allowed for any successful reply without payload.
    ReplyBytes::whole(encode_simple_reply(cookie, 0).to_vec())
}

/// Executes a request, turning a panic of the export (a bug) into an `EIO` reply
/// so that one bad request cannot take the connection's other requests with it.
pub(super) fn execute_guarded<E: Export>(export: &E, work: Work, context: &ExecutionContext<'_>) -> ReplyBytes {
    let cookie = work.header.cookie;
    match catch_unwind(AssertUnwindSafe(|| execute(export, work, context))) {
        Ok(reply) => reply,
        Err(_) => {
            error!(connection = %context.connection, cookie, "export panicked while executing a request");
            error_reply(cookie, Errno::Io, "internal error", context.structured)
        }
    }
}

fn execute<E: Export>(export: &E, work: Work, context: &ExecutionContext<'_>) -> ReplyBytes {
    let header = work.header;
    let (offset, length) = (header.offset_bytes, u64::from(header.length_bytes));
    let fua = header.flags & COMMAND_FLAG_FUA != 0;
    let result = match work.command {
        Command::Read => return execute_read(export, &header, context),
        Command::BlockStatus => return execute_block_status(export, &header, context),
        Command::Write => {
            let result = export.write(offset, &work.payload, fua);
            context.buffers.give_back(work.payload);
            result
        }
        Command::Flush => export.flush(),
        Command::Trim if length == 0 => Ok(()),
        Command::Trim => export.trim(offset, length, fua),
        Command::WriteZeroes if length == 0 => Ok(()),
        Command::WriteZeroes => {
            let options = ZeroOptions {
                no_hole: header.flags & COMMAND_FLAG_NO_HOLE != 0,
                fast_zero: header.flags & COMMAND_FLAG_FAST_ZERO != 0,
                fua,
            };
            export.write_zeroes(offset, length, options)
        }
        // A cache request is only a hint; this server keeps no cache to warm.
        Command::Cache => Ok(()),
        Command::Disconnect => unreachable!("the reader handles NBD_CMD_DISC"),
    };
    match result {
        Ok(()) => success_reply(header.cookie),
        Err(error) => {
            warn!(connection = %context.connection, cookie = header.cookie, "{} failed: {error}", work.command.name());
            error_reply(header.cookie, error.errno(), &error.to_string(), context.structured)
        }
    }
}

fn execute_read<E: Export>(export: &E, header: &RequestHeader, context: &ExecutionContext<'_>) -> ReplyBytes {
    let length = header.length_bytes as usize;
    if length == 0 {
        // An OFFSET_DATA chunk must carry at least one byte.
        if context.structured {
            let chunk = StructuredChunk { flags: REPLY_FLAG_DONE, cookie: header.cookie, payload: ChunkPayload::None };
            return ReplyBytes::whole(chunk.encode());
        }
        return success_reply(header.cookie);
    }
    // The reply header goes in front of the data in one buffer, so the data is
    // read once (into an aligned place) and sent with a single write.
    let prefix_length = if context.structured { 28 } else { SIMPLE_REPLY_HEADER_LENGTH_BYTES };
    let mut buffer = match context.buffers.take(prefix_length + length, prefix_length) {
        Ok(buffer) => buffer,
        Err(error) => {
            warn!(connection = %context.connection, cookie = header.cookie, "no memory for a read reply: {error}");
            return out_of_memory_reply(header, context.structured);
        }
    };
    match export.read(header.offset_bytes, &mut buffer[prefix_length..]) {
        Ok(()) => {
            if context.structured {
                let prefix =
                    encode_offset_data_prefix(header.cookie, REPLY_FLAG_DONE, header.offset_bytes, header.length_bytes);
                buffer[..prefix_length].copy_from_slice(&prefix);
            } else {
                buffer[..prefix_length].copy_from_slice(&encode_simple_reply(header.cookie, 0));
            }
            ReplyBytes::whole(buffer)
        }
        Err(error) => {
            context.buffers.give_back(buffer);
            warn!(connection = %context.connection, cookie = header.cookie, "NBD_CMD_READ failed: {error}");
            error_reply(header.cookie, error.errno(), &error.to_string(), context.structured)
        }
    }
}

fn execute_block_status<E: Export>(export: &E, header: &RequestHeader, context: &ExecutionContext<'_>) -> ReplyBytes {
    let length = u64::from(header.length_bytes);
    match export.block_status(header.offset_bytes, length) {
        Ok(extents) => {
            let request_one = header.flags & COMMAND_FLAG_REQ_ONE != 0;
            let descriptors = status_descriptors(&extents, header.length_bytes, request_one);
            let chunk = StructuredChunk {
                flags: REPLY_FLAG_DONE,
                cookie: header.cookie,
                payload: ChunkPayload::BlockStatus { context_id: BASE_ALLOCATION_CONTEXT_ID, descriptors },
            };
            ReplyBytes::whole(chunk.encode())
        }
        Err(error) => {
            warn!(connection = %context.connection, cookie = header.cookie, "NBD_CMD_BLOCK_STATUS failed: {error}");
            error_reply(header.cookie, error.errno(), &error.to_string(), context.structured)
        }
    }
}

/// Turns an export's status runs into reply descriptors: clipped to the request,
/// at most one with `REQ_ONE`, at most one per 512 bytes requested (so that the
/// reply fits the memory reserved for it) and [`BLOCK_STATUS_DESCRIPTORS_MAX`], merged
/// when neighbours share flags, and never empty (an export that reports nothing
/// gets the always-safe status 0 for the whole range).
pub fn status_descriptors(
    extents: &[StatusExtent],
    length_bytes: u32,
    request_one: bool,
) -> Vec<BlockStatusDescriptor> {
    let descriptors_max = block_status_descriptors_max(length_bytes);
    let mut descriptors: Vec<BlockStatusDescriptor> = Vec::new();
    let mut remaining = length_bytes;
    for extent in extents {
        if remaining == 0 {
            break;
        }
        let piece = u32::try_from(extent.length_bytes).unwrap_or(u32::MAX).min(remaining);
        if piece == 0 {
            continue;
        }
        let flags = extent.state.status_flags();
        let count = descriptors.len();
        match descriptors.last_mut() {
            Some(last) if last.flags == flags => last.length_bytes += piece,
            Some(_) if request_one || count == descriptors_max => break,
            _ => descriptors.push(BlockStatusDescriptor { length_bytes: piece, flags }),
        }
        remaining -= piece;
    }
    if descriptors.is_empty() {
        descriptors.push(BlockStatusDescriptor { length_bytes, flags: 0 });
    }
    descriptors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::AllocationState;

    #[test]
    fn status_descriptors_clip_merge_and_honour_req_one() {
        let extents = [
            StatusExtent { length_bytes: 4096, state: AllocationState::Data },
            StatusExtent { length_bytes: 4096, state: AllocationState::Zero },
            StatusExtent { length_bytes: 1 << 40, state: AllocationState::Hole },
        ];
        let all = status_descriptors(&extents, 16384, false);
        assert_eq!(
            all,
            vec![
                BlockStatusDescriptor { length_bytes: 4096, flags: 0 },
                BlockStatusDescriptor { length_bytes: 4096, flags: STATE_ZERO },
                BlockStatusDescriptor { length_bytes: 8192, flags: STATE_HOLE | STATE_ZERO },
            ]
        );
        assert_eq!(
            status_descriptors(&extents, 2048, true),
            vec![BlockStatusDescriptor { length_bytes: 2048, flags: 0 }]
        );
        assert_eq!(status_descriptors(&[], 512, false), vec![BlockStatusDescriptor { length_bytes: 512, flags: 0 }]);
    }
}

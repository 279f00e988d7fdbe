//! Bookkeeping shared by the devices and wrappers: tickets for batches that were
//! executed at submission, and batches that a wrapper splits between requests it
//! forwards to the device beneath and requests it answers itself.

use std::collections::BTreeMap;

use crate::{BatchTicket, BlockDevice, DeviceError, IoCompletion};

/// Completions of batches executed synchronously at submission, kept until
/// waited for: the ticket bookkeeping of a device that answers at once.
#[derive(Debug, Clone, Default)]
pub struct CompletedBatches {
    pending: BTreeMap<u64, Vec<IoCompletion>>,
    next_ticket: u64,
}

impl CompletedBatches {
    /// Keeps `completions` under a new ticket.
    pub fn insert(&mut self, completions: Vec<IoCompletion>) -> BatchTicket {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.pending.insert(ticket, completions);
        BatchTicket(ticket)
    }

    /// Removes and returns the completions of `ticket`.
    pub fn take(&mut self, ticket: BatchTicket, device: &str) -> Result<Vec<IoCompletion>, DeviceError> {
        self.pending
            .remove(&ticket.0)
            .ok_or_else(|| DeviceError::UnknownTicket { device: device.to_string(), ticket: ticket.0 })
    }
}

/// One outer batch of a wrapper: each slot is either forwarded to the inner device
/// (`None`, answered by the inner batch in order) or answered locally (`Some`).
#[derive(Debug)]
pub(crate) struct SplicedBatch {
    inner_ticket: Option<BatchTicket>,
    slots: Vec<Option<IoCompletion>>,
}

impl SplicedBatch {
    /// Submits the forwarded requests of `slots` (those whose local answer is
    /// `None`) to `inner` in their order. `forwarded` holds exactly those requests.
    pub(crate) fn submit<D: BlockDevice + ?Sized>(
        inner: &mut D,
        forwarded: Vec<crate::IoRequest>,
        slots: Vec<Option<IoCompletion>>,
    ) -> Result<Self, DeviceError> {
        assert_eq!(forwarded.len(), slots.iter().filter(|slot| slot.is_none()).count(), "one request per open slot");
        let inner_ticket = if forwarded.is_empty() { None } else { Some(inner.submit(forwarded)?) };
        Ok(Self { inner_ticket, slots })
    }

    /// For each slot, whether it was forwarded to the inner device.
    pub(crate) fn forwarded_mask(&self) -> Vec<bool> {
        self.slots.iter().map(Option::is_none).collect()
    }

    /// Waits for the forwarded requests and merges all completions in outer order.
    pub(crate) fn join<D: BlockDevice + ?Sized>(self, inner: &mut D) -> Result<Vec<IoCompletion>, DeviceError> {
        let mut forwarded = match self.inner_ticket {
            Some(ticket) => inner.wait(ticket)?.into_iter(),
            None => Vec::new().into_iter(),
        };
        let merged: Vec<IoCompletion> = self
            .slots
            .into_iter()
            .map(|slot| slot.unwrap_or_else(|| forwarded.next().expect("inner device returned too few completions")))
            .collect();
        assert!(forwarded.next().is_none(), "inner device returned too many completions");
        Ok(merged)
    }
}

/// Outer tickets of a wrapper, each with its spliced batch and per-batch context `T`.
#[derive(Debug)]
pub(crate) struct WrapperBatches<T> {
    pending: BTreeMap<u64, (SplicedBatch, T)>,
    next_ticket: u64,
}

impl<T> Default for WrapperBatches<T> {
    fn default() -> Self {
        Self { pending: BTreeMap::new(), next_ticket: 0 }
    }
}

impl<T> WrapperBatches<T> {
    /// Keeps a batch under a new outer ticket.
    pub(crate) fn insert(&mut self, batch: SplicedBatch, context: T) -> BatchTicket {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.pending.insert(ticket, (batch, context));
        BatchTicket(ticket)
    }

    /// Removes the batch of `ticket`.
    pub(crate) fn take(&mut self, ticket: BatchTicket, device: &str) -> Result<(SplicedBatch, T), DeviceError> {
        self.pending
            .remove(&ticket.0)
            .ok_or_else(|| DeviceError::UnknownTicket { device: device.to_string(), ticket: ticket.0 })
    }
}

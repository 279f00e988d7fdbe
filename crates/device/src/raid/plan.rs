//! Pure planning of a batch: which member blocks a request reads, and for the
//! writes of a batch, which rows they touch, how each row's parity is updated,
//! what each method reads first and what every member writes. No device and no
//! I/O: the planner is given the blocks read and returns the blocks to write.
//!
//! The writes of one batch are grouped by stripe, so several blocks of one stripe
//! share one parity update. A stripe whose every data block is written is a
//! *full-stripe write*: parity is computed from the new data, nothing is read. For
//! a partial stripe the cheaper of two methods (counted in blocks read) is used:
//! *read-modify-write* reads the old data being replaced and the old parity
//! (parity ^= old ^ new); *reconstruct-write* reads the data blocks of the affected
//! rows that are not being written. With a failed member, the method that does not
//! need to read it is used, row by row. Trims are carried out as writes of zeroes,
//! so that parity stays consistent with what reads return.
//!
//! Without payload (metadata-only simulation) the same blocks are planned and
//! the parity arithmetic is skipped: every block written is empty.

use super::block_set::{BlockSet, BlockWrites};

use super::geometry::Geometry;
use super::member_io::{MemberWrites, ReadResults};
use crate::DeviceError;

/// One row of a stripe touched by the writes of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RowWrite {
    pub(super) member_block: u64,
    pub(super) stripe: u64,
    pub(super) parity_member: usize,
    /// The data blocks written in this row: member and new data, by member.
    pub(super) written: Vec<(usize, Vec<u8>)>,
    pub(super) method: RowMethod,
}

impl RowWrite {
    /// The new data of `member`'s block in this row, if the batch writes it.
    fn written_data(&self, member: usize) -> Option<&[u8]> {
        self.written
            .binary_search_by_key(&member, |&(written, _)| written)
            .ok()
            .map(|index| self.written[index].1.as_slice())
    }

    /// The members whose data block in this row the batch writes.
    fn written_members(&self) -> impl Iterator<Item = usize> + '_ {
        self.written.iter().map(|&(member, _)| member)
    }
}

/// How a row's parity is brought up to date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RowMethod {
    /// Every data block of the row is written: parity from new data alone.
    Full,
    /// parity ^= old ^ new for each written block: reads old data and old parity.
    ReadModifyWrite,
    /// parity = XOR of new and unwritten old data: reads the unwritten data.
    ReconstructWrite,
    /// The parity member has failed: only data is written.
    NoParity,
}

/// Where the data of one logical block read comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ReadSource {
    /// The member block holding it.
    Direct { member: usize, member_block: u64 },
    /// The XOR of the rest of its row: its member has failed.
    Reconstruct { failed: usize, member_block: u64 },
}

/// Plans the member I/O of a batch for an array's geometry and failed member.
#[derive(Debug, Clone, Copy)]
pub(super) struct Planner {
    pub(super) geometry: Geometry,
    /// The failed member, if any: never read nor written.
    pub(super) failed: Option<usize>,
    /// Whether members keep payload (else every block planned is empty).
    pub(super) stores_payload: bool,
    /// Bytes of one block.
    pub(super) block_size_bytes: usize,
}

impl Planner {
    /// Where logical block `block` is read from.
    pub(super) fn read_source(&self, block: u64) -> ReadSource {
        let location = self.geometry.locate(block);
        if Some(location.member) == self.failed {
            ReadSource::Reconstruct { failed: location.member, member_block: location.member_block }
        } else {
            ReadSource::Direct { member: location.member, member_block: location.member_block }
        }
    }

    /// Per member, the member blocks that reading `sources` needs.
    pub(super) fn add_reads(&self, sources: &[ReadSource], reads: &mut [BlockSet]) {
        for source in sources {
            match *source {
                ReadSource::Direct { member, member_block } => {
                    reads[member].insert(member_block);
                }
                ReadSource::Reconstruct { failed, member_block } => {
                    for member in (0..self.geometry.member_count).filter(|&member| member != failed) {
                        reads[member].insert(member_block);
                    }
                }
            }
        }
    }

    /// Plans the writes of a batch (logical block → data): the rows touched,
    /// in member block order, each with its method.
    pub(super) fn plan_rows(&self, writes: &BlockWrites) -> Vec<RowWrite> {
        let mut placed: Vec<(u64, usize, u64, &Vec<u8>)> = writes
            .iter()
            .map(|(&block, data)| {
                let location = self.geometry.locate(block);
                (location.member_block, location.member, location.stripe, data)
            })
            .collect();
        // One block per (row, member): a row's members come out in order.
        placed.sort_unstable_by_key(|&(member_block, member, _, _)| (member_block, member));
        let mut rows: Vec<RowWrite> = Vec::new();
        for (member_block, member, stripe, data) in placed {
            match rows.last_mut() {
                Some(row) if row.member_block == member_block => row.written.push((member, data.clone())),
                _ => rows.push(RowWrite {
                    member_block,
                    stripe,
                    parity_member: self.geometry.parity_member(stripe),
                    written: vec![(member, data.clone())],
                    method: RowMethod::Full,
                }),
            }
        }
        self.choose_methods(&mut rows);
        rows
    }

    /// Chooses, per stripe, read-modify-write or reconstruct-write by the blocks
    /// each would read, then overrides per row where a failed member forces it.
    fn choose_methods(&self, rows: &mut [RowWrite]) {
        let data_count = self.geometry.data_member_count();
        let mut start = 0;
        while start < rows.len() {
            let stripe = self.geometry.stripe_of_row(rows[start].member_block);
            let end = start
                + rows[start..]
                    .iter()
                    .take_while(|row| self.geometry.stripe_of_row(row.member_block) == stripe)
                    .count();
            let stripe_rows = &mut rows[start..end];
            let rmw_reads: usize = stripe_rows.iter().map(|row| row.written.len() + 1).sum();
            let rcw_reads: usize = stripe_rows.iter().map(|row| data_count - row.written.len()).sum();
            let preferred =
                if rcw_reads < rmw_reads { RowMethod::ReconstructWrite } else { RowMethod::ReadModifyWrite };
            for row in stripe_rows.iter_mut() {
                row.method = self.row_method(row, preferred, data_count);
            }
            start = end;
        }
    }

    fn row_method(&self, row: &RowWrite, preferred: RowMethod, data_count: usize) -> RowMethod {
        if Some(row.parity_member) == self.failed {
            return RowMethod::NoParity;
        }
        if row.written.len() == data_count {
            return RowMethod::Full;
        }
        match self.failed {
            // The failed member's new data is known: only reconstruct-write avoids reading it.
            Some(failed) if row.written_data(failed).is_some() => RowMethod::ReconstructWrite,
            // The failed member is not written: reconstruct-write would have to read it.
            Some(failed) if failed != row.parity_member => RowMethod::ReadModifyWrite,
            _ => preferred,
        }
    }

    /// The data members of `row`'s stripe that the batch does not write in it.
    fn unwritten_data_members<'a>(&self, row: &'a RowWrite) -> impl Iterator<Item = usize> + 'a {
        self.geometry.data_members(row.stripe).filter(|&member| row.written_data(member).is_none())
    }

    /// Per member, the member blocks each row's method reads before writing.
    pub(super) fn pre_reads(&self, rows: &[RowWrite]) -> Vec<BlockSet> {
        let mut reads = vec![BlockSet::new(); self.geometry.member_count];
        for row in rows {
            match row.method {
                RowMethod::Full | RowMethod::NoParity => {}
                RowMethod::ReadModifyWrite => {
                    for member in row.written_members().chain([row.parity_member]) {
                        reads[member].insert(row.member_block);
                    }
                }
                RowMethod::ReconstructWrite => {
                    for member in self.unwritten_data_members(row) {
                        reads[member].insert(row.member_block);
                    }
                }
            }
        }
        reads
    }

    /// Per member, the member blocks the rows write (data and parity).
    pub(super) fn rows_member_blocks(&self, rows: &[RowWrite]) -> Vec<BlockSet> {
        let mut blocks = vec![BlockSet::new(); self.geometry.member_count];
        for row in rows {
            for member in row.written_members().filter(|&member| Some(member) != self.failed) {
                blocks[member].insert(row.member_block);
            }
            if row.method != RowMethod::NoParity {
                blocks[row.parity_member].insert(row.member_block);
            }
        }
        blocks
    }

    /// Computes the member writes of `rows` (data and parity) from the blocks
    /// their methods read first, found in `read`.
    pub(super) fn member_writes(&self, rows: &[RowWrite], read: &ReadResults) -> Result<MemberWrites, DeviceError> {
        let mut writes = vec![BlockWrites::new(); self.geometry.member_count];
        let old = |member: usize, block: u64| -> Result<&[u8], DeviceError> {
            match read.get(member, block, self.block_size_bytes) {
                Some(block) => block.data.map_err(Clone::clone),
                None => unreachable!("pre-read of member {member} block {block} was planned"),
            }
        };
        for row in rows {
            let mut parity: Option<Vec<u8>> = None;
            match row.method {
                RowMethod::NoParity => {}
                RowMethod::Full => row.written.iter().for_each(|(_, data)| xor_into(&mut parity, data)),
                RowMethod::ReadModifyWrite => {
                    xor_into(&mut parity, old(row.parity_member, row.member_block)?);
                    for (member, data) in &row.written {
                        xor_into(&mut parity, old(*member, row.member_block)?);
                        xor_into(&mut parity, data);
                    }
                }
                RowMethod::ReconstructWrite => {
                    for member in self.geometry.data_members(row.stripe) {
                        match row.written_data(member) {
                            Some(data) => xor_into(&mut parity, data),
                            None => xor_into(&mut parity, old(member, row.member_block)?),
                        }
                    }
                }
            }
            for (member, data) in &row.written {
                if Some(*member) != self.failed {
                    writes[*member].insert(row.member_block, data.clone());
                }
            }
            if row.method != RowMethod::NoParity {
                let parity = if self.stores_payload { parity.unwrap_or_default() } else { Vec::new() };
                writes[row.parity_member].insert(row.member_block, parity);
            }
        }
        Ok(writes)
    }
}

/// XORs `data` into `accumulator` (which takes a copy of the first block).
pub(super) fn xor_into(accumulator: &mut Option<Vec<u8>>, data: &[u8]) {
    match accumulator {
        None => *accumulator = Some(data.to_vec()),
        Some(bytes) => {
            assert_eq!(bytes.len(), data.len(), "XOR of blocks of one size");
            bytes.iter_mut().zip(data).for_each(|(byte, other)| *byte ^= other);
        }
    }
}

/// The XOR of the blocks given, `None` when there are none.
pub(super) fn xor_all<B: AsRef<[u8]>>(blocks: impl IntoIterator<Item = B>) -> Option<Vec<u8>> {
    let mut xor = None;
    blocks.into_iter().for_each(|data| xor_into(&mut xor, data.as_ref()));
    xor
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raid::RaidLevel;

    /// RAID-4, 4 data members and parity on member 4, stripe units of 4 blocks.
    fn planner(failed: Option<usize>) -> Planner {
        Planner { geometry: Geometry::new(RaidLevel::Raid4, 5, 4), failed, stores_payload: true, block_size_bytes: 4 }
    }

    fn writes(blocks: impl IntoIterator<Item = u64>) -> BlockWrites {
        let mut writes = BlockWrites::new();
        blocks.into_iter().for_each(|block| writes.insert(block, vec![u8::try_from(block).unwrap(); 4]));
        writes
    }

    fn methods(rows: &[RowWrite]) -> Vec<RowMethod> {
        rows.iter().map(|row| row.method).collect()
    }

    #[test]
    fn the_cheaper_method_is_chosen_per_stripe() {
        let planner = planner(None);
        // Logical blocks 0, 4, 8 and 12 are row 0 of data members 0..4: a full row.
        assert_eq!(methods(&planner.plan_rows(&writes([0, 4, 8, 12]))), vec![RowMethod::Full]);
        // One block: read-modify-write reads 2 blocks, reconstruct-write 3.
        let rows = planner.plan_rows(&writes([1]));
        assert_eq!(methods(&rows), vec![RowMethod::ReadModifyWrite]);
        assert_eq!(planner.pre_reads(&rows), vec![BlockSet::from([1]), [].into(), [].into(), [].into(), [1].into()]);
        // Three of four members in one row: reconstruct-write reads 1 block, read-modify-write 4.
        let rows = planner.plan_rows(&writes([2, 6, 10]));
        assert_eq!(methods(&rows), vec![RowMethod::ReconstructWrite]);
        assert_eq!(planner.pre_reads(&rows), vec![BlockSet::new(), [].into(), [].into(), [2].into(), [].into()]);
    }

    #[test]
    fn a_failed_member_forces_the_method_that_does_not_read_it() {
        let rows = planner(Some(4)).plan_rows(&writes([1]));
        assert_eq!(methods(&rows), vec![RowMethod::NoParity], "no parity to update");
        let rows = planner(Some(0)).plan_rows(&writes([1]));
        assert_eq!(methods(&rows), vec![RowMethod::ReconstructWrite], "the failed member's new data is known");
        let rows = planner(Some(3)).plan_rows(&writes([2, 6, 10]));
        assert_eq!(methods(&rows), vec![RowMethod::ReadModifyWrite], "the failed member is not written");
        let planner = planner(Some(0));
        let rows = planner.plan_rows(&writes([1]));
        assert!(planner.rows_member_blocks(&rows)[0].is_empty(), "the failed member is not written");
        assert_eq!(planner.rows_member_blocks(&rows)[4], BlockSet::from([1]));
    }

    #[test]
    fn parity_is_the_same_by_every_method() {
        let planner = planner(None);
        let old: Vec<Vec<u8>> = (0..5u8).map(|member| vec![member * 16 + 1; 4]).collect();
        let old_parity = xor_all(&old[..4]).unwrap();
        let mut read = ReadResults::default();
        for (member, data) in old[..4].iter().chain([&old_parity]).enumerate() {
            read.insert_run(member, 1, 1, Ok(data.clone()), 0);
        }
        let new = |member: usize| u8::try_from(member * 4 + 1).map(|block| vec![block; 4]).unwrap();
        for written in [vec![1], vec![1, 5, 9], vec![1, 5, 9, 13]] {
            let rows = planner.plan_rows(&writes(written.clone()));
            let parity = &planner.member_writes(&rows, &read).unwrap()[4][&1];
            let mut expected: Vec<Vec<u8>> = old[..4].to_vec();
            for block in written {
                let member = usize::try_from(block / 4).unwrap();
                expected[member] = new(member);
            }
            assert_eq!(parity, &xor_all(&expected).unwrap(), "{:?}", methods(&rows));
        }
    }

    #[test]
    fn reads_of_a_failed_member_are_reconstructed_from_the_rest_of_the_row() {
        let planner = planner(Some(1));
        assert_eq!(planner.read_source(0), ReadSource::Direct { member: 0, member_block: 0 });
        let source = planner.read_source(5);
        assert_eq!(source, ReadSource::Reconstruct { failed: 1, member_block: 1 });
        let mut reads = vec![BlockSet::new(); 5];
        planner.add_reads(&[source], &mut reads);
        assert_eq!(reads, vec![BlockSet::from([1]), [].into(), [1].into(), [1].into(), [1].into()]);
    }
}

//! Logical-to-physical mapping of LBNs to sectors (what DiskSim calls a
//! drive's "layout"; in Proxima that word names the engine's data layouts):
//! DiskSim's G1 zoned layout (traditional and serpentine mapping, sparing
//! schemes, slips, skews) and the table-driven G4 layout (index nodes of
//! repeated instances down to track patterns, with per-instance angular
//! skews, plus slips).
//!
//! Everything is computed arithmetically from the model's own tables: no
//! per-sector state, so memory is bounded by the model file, not the capacity.
//! Angles are fractions of a revolution in `[0, 1)`, measured from the index
//! mark (physical sector 0 of every G1 track starts at angle 0).

use crate::rotation::fraction;

/// A physical sector address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PhysicalSector {
    /// Cylinder, 0 at the outer edge.
    pub cylinder: u32,
    /// Surface (head).
    pub surface: u32,
    /// Physical sector index on the track, counted from the index mark.
    pub sector: u32,
}

/// The LBNs that share one track.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrackExtent {
    /// The track's cylinder.
    pub cylinder: u32,
    /// The track's surface.
    pub surface: u32,
    /// Lowest LBN on the track; the track's LBNs are consecutive from it.
    pub first_lbn: u64,
    /// Number of LBNs on the track.
    pub sector_count: u32,
    /// Physical sectors per track (including any spare or slipped ones).
    pub sectors_per_track: u32,
}

/// Where one LBN lies, with what the timing model needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Located {
    pub cylinder: u32,
    pub surface: u32,
    /// Physical sector index on the track.
    pub sector: u32,
    pub sectors_per_track: u32,
    /// Angle at which the sector starts, in revolutions `[0, 1)`.
    pub angle: f64,
    /// LBNs from this one to the end of its track, this one included (>= 1).
    pub lbns_left_on_track: u64,
    /// LBNs of the same track that precede this one, consecutively, on the
    /// sectors just before it (what `Read any free blocks` can pick up).
    pub lbns_before_on_track: u64,
}

/// Sorted slips: ranges of physical (pre-slip) positions that hold no LBN.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SlipTable {
    /// Physical start of each slip, ascending.
    starts: Vec<u64>,
    /// Length of each slip.
    lengths: Vec<u64>,
    /// For each slip, the logical position of the first LBN after it moves past it:
    /// `starts[j] - slipped_before(j)`.
    logical_starts: Vec<u64>,
    /// Total slipped before slip j (exclusive prefix sum), with one extra entry.
    cumulative: Vec<u64>,
}

impl Default for SlipTable {
    /// No slips.
    fn default() -> SlipTable {
        SlipTable::new(Vec::new())
    }
}

impl SlipTable {
    /// Builds the table from (start, length) pairs in any order; overlapping or
    /// adjacent slips are merged.
    pub fn new(mut slips: Vec<(u64, u64)>) -> SlipTable {
        slips.retain(|&(_, length)| length > 0);
        slips.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(slips.len());
        for (start, length) in slips {
            match merged.last_mut() {
                Some((last_start, last_length)) if start <= *last_start + *last_length => {
                    *last_length = (*last_length).max(start + length - *last_start);
                }
                _ => merged.push((start, length)),
            }
        }
        let mut table =
            SlipTable { starts: Vec::new(), lengths: Vec::new(), logical_starts: Vec::new(), cumulative: vec![0] };
        let mut total = 0u64;
        for (start, length) in merged {
            table.starts.push(start);
            table.lengths.push(length);
            table.logical_starts.push(start - total);
            total += length;
            table.cumulative.push(total);
        }
        table
    }

    /// Every slipped position, ascending.
    pub fn positions(&self) -> impl Iterator<Item = u64> + '_ {
        self.starts.iter().zip(&self.lengths).flat_map(|(&start, &length)| start..start + length)
    }

    /// Total slipped positions.
    pub fn total(&self) -> u64 {
        *self.cumulative.last().unwrap_or(&0)
    }

    /// Physical position of logical position `logical`.
    pub fn to_physical(&self, logical: u64) -> u64 {
        let passed = self.logical_starts.partition_point(|&start| start <= logical);
        logical + self.cumulative[passed]
    }

    /// Logical position at physical `physical`, or `None` inside a slip.
    pub fn to_logical(&self, physical: u64) -> Option<u64> {
        let index = self.starts.partition_point(|&start| start <= physical);
        if index > 0 && physical < self.starts[index - 1] + self.lengths[index - 1] {
            return None;
        }
        Some(physical - self.cumulative[index])
    }

    /// Slipped positions in the physical range `[from, to)`.
    pub fn slipped_in(&self, from: u64, to: u64) -> u64 {
        let mut count = 0;
        let first = self.starts.partition_point(|&start| start < from).saturating_sub(1);
        for index in first..self.starts.len() {
            let (start, end) = (self.starts[index], self.starts[index] + self.lengths[index]);
            if start >= to {
                break;
            }
            count += end.min(to).saturating_sub(start.max(from));
        }
        count
    }
}

/// Remapped defects: each defective location's replacement, and back. The
/// locations are zone-relative physical sector numbers (or track numbers under
/// track sparing), counted from the zone's first sector before any skew.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct DefectTable {
    /// (defective, replacement), sorted by defective location.
    by_defective: Vec<(u64, u64)>,
    /// (replacement, defective), sorted by replacement location.
    by_replacement: Vec<(u64, u64)>,
}

impl DefectTable {
    /// Builds the table from (defective, replacement) pairs in any order. A pair
    /// whose replacement is the defective location itself changes nothing and is
    /// dropped.
    pub fn new(pairs: Vec<(u64, u64)>) -> DefectTable {
        let mut by_defective: Vec<(u64, u64)> = pairs.into_iter().filter(|(from, to)| from != to).collect();
        by_defective.sort_unstable();
        let mut by_replacement: Vec<(u64, u64)> = by_defective.iter().map(|&(from, to)| (to, from)).collect();
        by_replacement.sort_unstable();
        DefectTable { by_defective, by_replacement }
    }

    /// True when nothing is remapped.
    pub fn is_empty(&self) -> bool {
        self.by_defective.is_empty()
    }

    /// The (defective, replacement) pairs, by defective location.
    pub fn pairs(&self) -> &[(u64, u64)] {
        &self.by_defective
    }

    /// Where defective location `location` is replaced, if it is.
    pub fn replacement_of(&self, location: u64) -> Option<u64> {
        lookup(&self.by_defective, location)
    }

    /// Which defective location `location` replaces, if any.
    pub fn defective_for(&self, location: u64) -> Option<u64> {
        lookup(&self.by_replacement, location)
    }

    /// The first defective location after `location`.
    pub fn next_after(&self, location: u64) -> Option<u64> {
        let index = self.by_defective.partition_point(|&(from, _)| from <= location);
        self.by_defective.get(index).map(|&(from, _)| from)
    }

    /// The last defective location before `location`.
    pub fn previous_before(&self, location: u64) -> Option<u64> {
        let index = self.by_defective.partition_point(|&(from, _)| from < location);
        index.checked_sub(1).map(|index| self.by_defective[index].0)
    }
}

fn lookup(sorted: &[(u64, u64)], key: u64) -> Option<u64> {
    sorted.binary_search_by_key(&key, |&(from, _)| from).ok().map(|index| sorted[index].1)
}

/// A drive's layout.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Layout {
    G1(G1Layout),
    G4(G4Layout),
}

impl Layout {
    /// LBNs the layout can address.
    pub fn capacity(&self) -> u64 {
        match self {
            Layout::G1(layout) => layout.capacity(),
            Layout::G4(layout) => layout.capacity(),
        }
    }

    pub fn locate(&self, lbn: u64) -> Option<Located> {
        match self {
            Layout::G1(layout) => layout.locate(lbn),
            Layout::G4(layout) => layout.locate(lbn),
        }
    }

    pub fn physical_to_lbn(&self, physical: PhysicalSector) -> Option<u64> {
        match self {
            Layout::G1(layout) => layout.physical_to_lbn(physical),
            Layout::G4(layout) => layout.physical_to_lbn(physical),
        }
    }
}

/// DiskSim's G1 sparing schemes that this layout models.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sparing {
    /// No spares in the zone (schemes 0 and 7: spares, if any, at the end of the disk).
    None,
    /// `spares` whole tracks at the end of each zone (scheme 1).
    TracksAtZoneEnd,
    /// `spares` sectors at the end (or front) of each period of physical sectors
    /// (track: 3; cylinder: 2, 4; cylinder range: 8; zone: 9, 10; front of cylinder: 5, 6).
    Periodic { period_kind: Period, at_front: bool, slips_use_spares: bool },
}

/// The span one set of spares covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Period {
    Track,
    Cylinder,
    CylinderRange(u32),
    Zone,
}

/// How G1 tracks are ordered within a zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MappingScheme {
    /// Scheme 0: surfaces ascending in every cylinder.
    Traditional,
    /// Scheme 1: surfaces alternate direction per cylinder, restarting each zone.
    SerpentinePerZone,
    /// Scheme 2: even cylinders ascending, odd descending, disk-wide.
    SerpentineByParity,
}

/// One G1 zone.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct G1Zone {
    pub first_cylinder: u32,
    pub last_cylinder: u32,
    pub sectors_per_track: u32,
    pub first_block_offset_sectors: f64,
    pub empty_front_sectors: u64,
    pub track_skew_sectors: f64,
    pub cylinder_skew_sectors: f64,
    pub spare_count: u64,
    pub slips: SlipTable,
    /// Under track sparing, slips name whole tracks (zone-relative physical
    /// track numbers, the empty front included): a slipped track holds no LBN
    /// and the tracks after it move up by one. Filled by [`G1Layout::new`]
    /// from `slips`.
    pub slipped_tracks: SlipTable,
    /// Under sparing by track, cylinder or range of cylinders whose spares
    /// take slips (schemes 2, 3, 5, 8), slips name physical zone positions
    /// (counted from the zone's first sector, the empty front included),
    /// ascending: a slipped position holds no LBN and pushes the rest of its
    /// period's data one position on, into the period's spares, as DiskSim
    /// 4.0 maps them; later periods are unaffected. Filled by
    /// [`G1Layout::new`] from `slips`.
    pub period_slips: Vec<u64>,
    /// Remapped defective sectors (or tracks, under track sparing). Only pairs
    /// whose defective location holds data are kept (by [`G1Layout::new`]).
    pub defects: DefectTable,
    /// First LBN of the zone (filled by [`G1Layout::new`]).
    pub first_lbn: u64,
    /// LBNs in the zone (filled by [`G1Layout::new`]).
    pub lbn_count: u64,
}

/// DiskSim's first-generation zoned layout.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct G1Layout {
    pub surface_count: u32,
    pub mapping: MappingScheme,
    pub sparing: Sparing,
    pub zones: Vec<G1Zone>,
}

impl G1Layout {
    /// Builds the layout, computing each zone's LBN range. Zones must be sorted
    /// by cylinder and non-empty (the loader checks).
    pub fn new(surface_count: u32, mapping: MappingScheme, sparing: Sparing, mut zones: Vec<G1Zone>) -> G1Layout {
        let mut next_lbn = 0;
        for zone in &mut zones {
            if sparing == Sparing::TracksAtZoneEnd {
                zone.slipped_tracks = std::mem::take(&mut zone.slips);
            }
            if period_of(zone, surface_count, sparing).is_some() && sparing_slips_use_spares(sparing) {
                zone.period_slips = std::mem::take(&mut zone.slips).positions().collect();
            }
            zone.first_lbn = next_lbn;
            zone.lbn_count = zone_capacity(zone, surface_count, sparing);
            next_lbn += zone.lbn_count;
        }
        let mut layout = G1Layout { surface_count, mapping, sparing, zones };
        // A defect where no LBN lives (a spare, a slip) moves nothing.
        for index in 0..layout.zones.len() {
            let zone = &layout.zones[index];
            let kept: Vec<(u64, u64)> = zone
                .defects
                .pairs()
                .iter()
                .copied()
                .filter(|&(defective, _)| layout.holds_data(zone, defective))
                .collect();
            layout.zones[index].defects = DefectTable::new(kept);
        }
        layout
    }

    /// Whether sparing is by whole tracks, so that defects name tracks.
    fn defects_are_tracks(&self) -> bool {
        self.sparing == Sparing::TracksAtZoneEnd
    }

    /// Whether defect location `location` of `zone` (a sector, or a track under
    /// track sparing) holds any LBN.
    fn holds_data(&self, zone: &G1Zone, location: u64) -> bool {
        if self.defects_are_tracks() {
            let spt = u64::from(zone.sectors_per_track);
            (location * spt..(location + 1) * spt).any(|position| {
                self.logical_position(zone, position).is_some_and(|logical| self.data_index_at(zone, logical).is_some())
            })
        } else {
            self.data_index_at(zone, location).is_some()
        }
    }

    /// The first zone with a sparing period holding more slips than spares
    /// (where slips take the period's spares): (zone index, slips, spares).
    pub fn overfull_period(&self) -> Option<(usize, u64, u64)> {
        for (index, zone) in self.zones.iter().enumerate() {
            let Some((period, spares, _)) = self.period(zone) else {
                continue;
            };
            let mut slips = zone.period_slips.iter().map(|&position| position / period).peekable();
            while let Some(period_index) = slips.next() {
                let mut count = 1;
                while slips.next_if_eq(&period_index).is_some() {
                    count += 1;
                }
                if count > spares {
                    return Some((index, count, spares));
                }
            }
        }
        None
    }

    /// The first defect whose replacement is not usable: outside the zone, or
    /// holding data of its own. Returns (defective, replacement).
    pub fn unusable_replacement(&self) -> Option<(usize, u64, u64)> {
        for (index, zone) in self.zones.iter().enumerate() {
            let tracks = u64::from(zone.last_cylinder - zone.first_cylinder + 1) * u64::from(self.surface_count);
            let limit = if self.defects_are_tracks() { tracks } else { zone_sectors(zone, self.surface_count) };
            for &(defective, replacement) in zone.defects.pairs() {
                if replacement >= limit || self.holds_data(zone, replacement) {
                    return Some((index, defective, replacement));
                }
            }
        }
        None
    }

    /// The zone position of data index `data_index`: the empty front (counted
    /// in data slots, before sparing, as DiskSim's layout does) and spares
    /// inserted.
    fn position_of_data_index(&self, zone: &G1Zone, data_index: u64) -> u64 {
        let slot = data_index + zone.empty_front_sectors;
        match self.period(zone) {
            Some((period, spares, at_front)) => {
                let usable = period - spares;
                let period_index = slot / usable;
                let front = if at_front { spares } else { 0 };
                let mut offset = slot % usable;
                for slip_offset in period_slip_offsets(zone, period_index, period, front) {
                    if slip_offset <= offset {
                        offset += 1;
                    }
                }
                period_index * period + front + offset
            }
            None => slot,
        }
    }

    /// The data index at zone position `position`, or `None` for empty front,
    /// spare, slipped or unused positions.
    fn data_index_at(&self, zone: &G1Zone, position: u64) -> Option<u64> {
        let slot = match self.period(zone) {
            Some((period, spares, at_front)) => {
                let within = position % period;
                let usable = period - spares;
                let front = if at_front { spares } else { 0 };
                let offset = within.checked_sub(front)?;
                let mut slipped_before = 0;
                for slip_offset in period_slip_offsets(zone, position / period, period, front) {
                    if slip_offset == offset {
                        return None;
                    }
                    slipped_before += u64::from(slip_offset < offset);
                }
                let data_within = offset - slipped_before;
                if data_within >= usable {
                    return None;
                }
                (position / period) * usable + data_within
            }
            None => position,
        };
        let data_index = slot.checked_sub(zone.empty_front_sectors)?;
        let logical = zone.slips.to_logical(data_index)?;
        (logical < zone.lbn_count).then_some(data_index)
    }

    fn capacity(&self) -> u64 {
        self.zones.last().map_or(0, |zone| zone.first_lbn + zone.lbn_count)
    }

    fn zone_of_lbn(&self, lbn: u64) -> Option<&G1Zone> {
        let index = self.zones.partition_point(|zone| zone.first_lbn + zone.lbn_count <= lbn);
        self.zones.get(index).filter(|zone| lbn >= zone.first_lbn)
    }

    /// Spares per period and the period's length in sectors, for periodic sparing.
    fn period(&self, zone: &G1Zone) -> Option<(u64, u64, bool)> {
        period_of(zone, self.surface_count, self.sparing)
    }

    fn locate(&self, lbn: u64) -> Option<Located> {
        let zone = self.zone_of_lbn(lbn)?;
        let data_index = zone.slips.to_physical(lbn - zone.first_lbn);
        let natural = self.position_of_data_index(zone, data_index);
        let spt = u64::from(zone.sectors_per_track);
        let natural_track = natural / spt;
        // A remapped sector stands alone at its replacement; its neighbours stay.
        let (position, remapped) = match self.remapped_sector(zone, natural) {
            Some(replacement) => (replacement, true),
            None => (self.physical_position(zone, natural), false),
        };
        let mut track_index = position / spt;
        if self.defects_are_tracks() {
            track_index = zone.defects.replacement_of(track_index).unwrap_or(track_index);
        }
        let position_on_track = position % spt;
        let (cylinder, surface) = self.track_address(zone, track_index);
        let skew = self.skew_sectors(zone, track_index);
        let sector = ((position_on_track + skew) % spt) as u32;
        let (lbns_left_on_track, lbns_before_on_track) = if remapped {
            (1, 0)
        } else {
            (
                self.lbns_left_on_track(zone, lbn, data_index, natural, (natural_track + 1) * spt),
                self.lbns_before_on_track(zone, lbn, data_index, natural, natural_track * spt),
            )
        };
        Some(Located {
            cylinder,
            surface,
            sector,
            sectors_per_track: zone.sectors_per_track,
            angle: f64::from(sector) / spt as f64,
            lbns_left_on_track,
            lbns_before_on_track,
        })
    }

    /// The physical zone position of logical zone position `position`: slipped
    /// tracks (track sparing) pushed past.
    fn physical_position(&self, zone: &G1Zone, position: u64) -> u64 {
        if zone.slipped_tracks.total() == 0 {
            return position;
        }
        let spt = u64::from(zone.sectors_per_track);
        zone.slipped_tracks.to_physical(position / spt) * spt + position % spt
    }

    /// The logical zone position at physical zone position `position`, or
    /// `None` on a slipped track.
    fn logical_position(&self, zone: &G1Zone, position: u64) -> Option<u64> {
        if zone.slipped_tracks.total() == 0 {
            return Some(position);
        }
        let spt = u64::from(zone.sectors_per_track);
        Some(zone.slipped_tracks.to_logical(position / spt)? * spt + position % spt)
    }

    /// The replacement of the sector at zone position `position`, under sector sparing.
    fn remapped_sector(&self, zone: &G1Zone, position: u64) -> Option<u64> {
        if zone.defects.is_empty() || self.defects_are_tracks() {
            return None;
        }
        zone.defects.replacement_of(position)
    }

    /// Remapped sectors split a track's run of LBNs: the next one at or after
    /// `position` before `track_end`, if any (sector sparing only).
    fn next_defect_on_track(&self, zone: &G1Zone, position: u64, track_end: u64) -> Option<u64> {
        if zone.defects.is_empty() || self.defects_are_tracks() {
            return None;
        }
        zone.defects.next_after(position).filter(|&defective| defective < track_end)
    }

    /// Data positions (LBN slots before slips) of the zone lying before zone
    /// position `position`: positions past the empty front, less spares.
    fn data_positions_before(&self, zone: &G1Zone, position: u64) -> u64 {
        let slots = match self.period(zone) {
            Some((period, spares, at_front)) => {
                let usable = period - spares;
                let front = if at_front { spares } else { 0 };
                let offset = (position % period).saturating_sub(front);
                let slipped = period_slip_offsets(zone, position / period, period, front)
                    .filter(|&slip_offset| slip_offset < offset)
                    .count() as u64;
                (position / period) * usable + (offset - slipped).min(usable)
            }
            None => position,
        };
        slots.saturating_sub(zone.empty_front_sectors)
    }

    /// LBNs from `lbn` (at data index `data_index`) to the end of its track,
    /// whose physical end is zone position `track_end`: data positions up to
    /// there, less spares and slips, within the zone.
    /// A remapped sector ends the run before it.
    fn lbns_left_on_track(&self, zone: &G1Zone, lbn: u64, data_index: u64, position: u64, track_end: u64) -> u64 {
        let end = self.next_defect_on_track(zone, position, track_end).unwrap_or(track_end);
        let data_end = self.data_positions_before(zone, end);
        let on_track =
            data_end.saturating_sub(data_index) - zone.slips.slipped_in(data_index, data_end.max(data_index));
        on_track.min(zone.first_lbn + zone.lbn_count - lbn).max(1)
    }

    /// LBNs of `lbn`'s track before it, the track starting at zone position
    /// `track_start`; a remapped sector ends the run after it.
    fn lbns_before_on_track(&self, zone: &G1Zone, lbn: u64, data_index: u64, position: u64, track_start: u64) -> u64 {
        let previous_defect = if zone.defects.is_empty() || self.defects_are_tracks() {
            None
        } else {
            zone.defects.previous_before(position).filter(|&defective| defective >= track_start)
        };
        let start = previous_defect.map_or(track_start, |defective| defective + 1);
        let data_start = self.data_positions_before(zone, start).min(data_index);
        let before = data_index - data_start - zone.slips.slipped_in(data_start, data_index);
        before.min(lbn - zone.first_lbn)
    }

    fn track_address(&self, zone: &G1Zone, track_index: u64) -> (u32, u32) {
        let surfaces = u64::from(self.surface_count);
        let cylinder = zone.first_cylinder + (track_index / surfaces) as u32;
        let step = (track_index % surfaces) as u32;
        let descending = match self.mapping {
            MappingScheme::Traditional => false,
            MappingScheme::SerpentinePerZone => (cylinder - zone.first_cylinder) % 2 == 1,
            MappingScheme::SerpentineByParity => cylinder % 2 == 1,
        };
        let surface = if descending { self.surface_count - 1 - step } else { step };
        (cylinder, surface)
    }

    fn track_index(&self, zone: &G1Zone, cylinder: u32, surface: u32) -> u64 {
        let descending = match self.mapping {
            MappingScheme::Traditional => false,
            MappingScheme::SerpentinePerZone => (cylinder - zone.first_cylinder) % 2 == 1,
            MappingScheme::SerpentineByParity => cylinder % 2 == 1,
        };
        let step = if descending { self.surface_count - 1 - surface } else { surface };
        u64::from(cylinder - zone.first_cylinder) * u64::from(self.surface_count) + u64::from(step)
    }

    /// Rotational offset, in sectors, of the first position of track `track_index`:
    /// the zone's first-block offset plus a track skew per head switch and a
    /// cylinder skew per cylinder switch crossed since the zone's start.
    fn skew_sectors(&self, zone: &G1Zone, track_index: u64) -> u64 {
        let surfaces = u64::from(self.surface_count);
        let cylinder_switches = track_index / surfaces;
        let track_switches = track_index - cylinder_switches;
        // Under sparing by track or cylinder, each slip before the track's
        // period pushes its skew on by one sector (DiskSim 4.0's layout).
        let skew_period_start = match self.sparing {
            Sparing::Periodic { period_kind: Period::Track, .. } => Some(track_index),
            Sparing::Periodic { period_kind: Period::Cylinder, .. } => Some(cylinder_switches * surfaces),
            _ => None,
        };
        let slips_before = skew_period_start.map_or(0, |first_track| {
            let cutoff = first_track * u64::from(zone.sectors_per_track);
            zone.period_slips.partition_point(|&position| position < cutoff) as u64 + zone.slips.slipped_in(0, cutoff)
        });
        let skew = zone.first_block_offset_sectors
            + track_switches as f64 * zone.track_skew_sectors
            + cylinder_switches as f64 * zone.cylinder_skew_sectors
            + slips_before as f64;
        let spt = f64::from(zone.sectors_per_track);
        (skew.round().rem_euclid(spt)) as u64 % u64::from(zone.sectors_per_track)
    }

    fn physical_to_lbn(&self, physical: PhysicalSector) -> Option<u64> {
        if physical.surface >= self.surface_count {
            return None;
        }
        let zone =
            self.zones.iter().find(|zone| (zone.first_cylinder..=zone.last_cylinder).contains(&physical.cylinder))?;
        if physical.sector >= zone.sectors_per_track {
            return None;
        }
        let spt = u64::from(zone.sectors_per_track);
        let physical_track = self.track_index(zone, physical.cylinder, physical.surface);
        let skew = self.skew_sectors(zone, physical_track);
        let position_on_track = (u64::from(physical.sector) + spt - skew) % spt;
        let mut track_index = physical_track;
        if self.defects_are_tracks() && !zone.defects.is_empty() {
            if zone.defects.replacement_of(physical_track).is_some() {
                return None;
            }
            track_index = zone.defects.defective_for(physical_track).unwrap_or(physical_track);
        }
        let mut position = track_index * spt + position_on_track;
        if !self.defects_are_tracks() && !zone.defects.is_empty() {
            if zone.defects.replacement_of(position).is_some() {
                return None;
            }
            position = zone.defects.defective_for(position).unwrap_or(position);
        }
        let data_index = self.data_index_at(zone, self.logical_position(zone, position)?)?;
        Some(zone.first_lbn + zone.slips.to_logical(data_index)?)
    }
}

fn zone_sectors(zone: &G1Zone, surface_count: u32) -> u64 {
    u64::from(zone.last_cylinder - zone.first_cylinder + 1)
        * u64::from(surface_count)
        * u64::from(zone.sectors_per_track)
}

/// Whether slips fall into the spares of their own sparing period.
fn sparing_slips_use_spares(sparing: Sparing) -> bool {
    matches!(sparing, Sparing::Periodic { slips_use_spares: true, .. })
}

/// The slips of period `period_index` (of `period` positions, the first
/// `front` of them spares), as offsets from the period's first data
/// position, ascending; slips among the front spares are ignored.
fn period_slip_offsets(zone: &G1Zone, period_index: u64, period: u64, front: u64) -> impl Iterator<Item = u64> + '_ {
    let start = period_index * period;
    let first = zone.period_slips.partition_point(|&position| position < start);
    zone.period_slips[first..]
        .iter()
        .take_while(move |&&position| position < start + period)
        .filter_map(move |&position| (position - start).checked_sub(front))
}

fn period_of(zone: &G1Zone, surface_count: u32, sparing: Sparing) -> Option<(u64, u64, bool)> {
    let Sparing::Periodic { period_kind, at_front, .. } = sparing else {
        return None;
    };
    let spt = u64::from(zone.sectors_per_track);
    let period = match period_kind {
        Period::Track => spt,
        Period::Cylinder => spt * u64::from(surface_count),
        Period::CylinderRange(cylinders) => spt * u64::from(surface_count) * u64::from(cylinders.max(1)),
        // Spares at the end of the zone: the data simply stop early.
        Period::Zone => return None,
    };
    // A period can never be all spares; the loader rejects such zones.
    (zone.spare_count < period).then_some((period, zone.spare_count, at_front))
}

/// LBNs a zone holds under the sparing scheme. Slips consume spares where the
/// scheme says so; otherwise each slip costs one LBN.
fn zone_capacity(zone: &G1Zone, surface_count: u32, sparing: Sparing) -> u64 {
    // The empty front counts data slots (before sparing).
    let empty = zone.empty_front_sectors;
    let physical = zone_sectors(zone, surface_count);
    let spt = u64::from(zone.sectors_per_track);
    match sparing {
        Sparing::None => physical.saturating_sub(empty + zone.slips.total()),
        Sparing::TracksAtZoneEnd => physical.saturating_sub(empty + zone.spare_count * spt),
        Sparing::Periodic { period_kind: Period::Zone, slips_use_spares, .. } => {
            let data = physical.saturating_sub(empty + zone.spare_count);
            if slips_use_spares {
                data
            } else {
                data.saturating_sub(zone.slips.total())
            }
        }
        Sparing::Periodic { .. } => {
            let Some((period, spares, at_front)) = period_of(zone, surface_count, sparing) else {
                return 0;
            };
            let usable = period - spares;
            let remainder = physical % period;
            let partial = if at_front { remainder.saturating_sub(spares) } else { remainder.min(usable) };
            ((physical / period) * usable + partial).saturating_sub(empty + zone.slips.total())
        }
    }
}

/// One entry of a G4 index node: `instance_count` repetitions of a child (an
/// index node or a track pattern), each `instance_lbns` long and
/// `instance_cylinders` wide, the i-th shifted by `i·skew` revolutions.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct G4Entry {
    pub lbn: u64,
    pub cylinder: i64,
    pub angle: f64,
    pub instance_lbns: u64,
    pub instance_cylinders: i64,
    pub skew: f64,
    pub run_lbns: u64,
    /// Signed: a negative run walks cylinders downward.
    pub run_cylinders: i64,
    pub child: G4Child,
    /// Surface, for track children.
    pub surface: u32,
}

/// What a G4 entry repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum G4Child {
    Index(usize),
    Track(usize),
}

/// A G4 track pattern: LBNs `0..=last-first` map to sectors `first..=last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TrackPattern {
    pub first_sector: u32,
    pub last_sector: u32,
    pub sectors_per_track: u32,
}

/// DiskSim's fourth-generation table layout.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct G4Layout {
    pub patterns: Vec<TrackPattern>,
    pub nodes: Vec<Vec<G4Entry>>,
    pub root: usize,
    pub slips: SlipTable,
    /// Remapped runs of LBNs, ascending and disjoint (the loader checks).
    pub remaps: Vec<G4Remap>,
    /// LBNs exported (the layout may describe more).
    pub lbn_count: u64,
}

/// A G4 remap: `length` LBNs from `lbn` live on consecutive sectors from
/// `sector` of the track at (`cylinder`, `surface`), which has
/// `sectors_per_track` sectors, instead of where the table puts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct G4Remap {
    pub lbn: u64,
    pub length: u64,
    pub cylinder: u32,
    pub surface: u32,
    pub sector: u32,
    pub sectors_per_track: u32,
}

impl G4Remap {
    fn end_lbn(&self) -> u64 {
        self.lbn + self.length
    }

    fn locate(&self, lbn: u64) -> Located {
        let offset = lbn - self.lbn;
        let sector = self.sector + offset as u32;
        Located {
            cylinder: self.cylinder,
            surface: self.surface,
            sector,
            sectors_per_track: self.sectors_per_track,
            angle: f64::from(sector) / f64::from(self.sectors_per_track),
            lbns_left_on_track: self.length - offset,
            lbns_before_on_track: offset,
        }
    }
}

/// One step down the G4 tree.
struct G4Step<'a> {
    entry: &'a G4Entry,
    instance: u64,
    offset_in_instance: u64,
}

impl G4Layout {
    fn capacity(&self) -> u64 {
        self.lbn_count
    }

    fn step<'a>(&'a self, node: usize, offset: u64) -> Option<G4Step<'a>> {
        let entries = &self.nodes[node];
        let index = entries.partition_point(|entry| entry.lbn <= offset).checked_sub(1)?;
        let entry = &entries[index];
        let relative = offset - entry.lbn;
        if relative >= entry.run_lbns || entry.instance_lbns == 0 {
            return None;
        }
        Some(G4Step {
            entry,
            instance: relative / entry.instance_lbns,
            offset_in_instance: relative % entry.instance_lbns,
        })
    }

    fn locate(&self, lbn: u64) -> Option<Located> {
        if lbn >= self.lbn_count {
            return None;
        }
        if self.remaps.is_empty() {
            return self.locate_in_table(lbn);
        }
        // The remap at or before `lbn`, and the one after it.
        let index = self.remaps.partition_point(|remap| remap.lbn <= lbn);
        if let Some(remap) = index.checked_sub(1).map(|index| self.remaps[index]) {
            if lbn < remap.end_lbn() {
                return Some(remap.locate(lbn));
            }
        }
        let mut located = self.locate_in_table(lbn)?;
        // Remapped runs split the table's tracks.
        if let Some(next) = self.remaps.get(index) {
            located.lbns_left_on_track = located.lbns_left_on_track.min(next.lbn - lbn);
        }
        if let Some(previous) = index.checked_sub(1).map(|index| self.remaps[index]) {
            located.lbns_before_on_track = located.lbns_before_on_track.min(lbn - previous.end_lbn());
        }
        Some(located)
    }

    /// Where the table (without remaps) puts `lbn`.
    fn locate_in_table(&self, lbn: u64) -> Option<Located> {
        let physical = self.slips.to_physical(lbn);
        let (mut node, mut offset, mut cylinder, mut angle) = (self.root, physical, 0i64, 0.0f64);
        // The loader guarantees the tree is acyclic, so depth is bounded by the node count.
        for _ in 0..=self.nodes.len() {
            let step = self.step(node, offset)?;
            let entry = step.entry;
            let direction = if entry.run_cylinders < 0 { -1 } else { 1 };
            cylinder += entry.cylinder + direction * step.instance as i64 * entry.instance_cylinders;
            angle += entry.angle + step.instance as f64 * entry.skew;
            match entry.child {
                G4Child::Index(child) => {
                    node = child;
                    offset = step.offset_in_instance;
                }
                G4Child::Track(pattern_index) => {
                    let pattern = self.patterns[pattern_index];
                    let spt = pattern.sectors_per_track;
                    let lbn_on_track = step.offset_in_instance;
                    let track_angle = fraction(angle);
                    // Non-negative, so truncation is the floor (without a libm call).
                    let first_sector = (track_angle * f64::from(spt)) as u64;
                    let sector =
                        ((first_sector + u64::from(pattern.first_sector) + lbn_on_track) % u64::from(spt)) as u32;
                    let track_end = physical - lbn_on_track + entry.instance_lbns;
                    let left = track_end - physical - self.slips.slipped_in(physical, track_end);
                    return Some(Located {
                        cylinder: u32::try_from(cylinder).ok()?,
                        surface: entry.surface,
                        sector,
                        sectors_per_track: spt,
                        angle: fraction(
                            track_angle + (u64::from(pattern.first_sector) + lbn_on_track) as f64 / f64::from(spt),
                        ),
                        lbns_left_on_track: left.min(self.lbn_count - lbn).max(1),
                        lbns_before_on_track: (lbn_on_track - self.slips.slipped_in(physical - lbn_on_track, physical))
                            .min(lbn),
                    });
                }
            }
        }
        None
    }

    /// Finds the layout-space position of a physical sector by walking every
    /// entry whose cylinder range holds it (a query, not on the timing path).
    fn physical_to_lbn(&self, physical: PhysicalSector) -> Option<u64> {
        for remap in &self.remaps {
            if (remap.cylinder, remap.surface) == (physical.cylinder, physical.surface)
                && (remap.sector..remap.sector + remap.length as u32).contains(&physical.sector)
            {
                return Some(remap.lbn + u64::from(physical.sector - remap.sector));
            }
        }
        let lbn = self.table_lbn_at(physical)?;
        // The table's sectors of a remapped run are defective.
        let remapped = self.remaps.iter().any(|remap| (remap.lbn..remap.end_lbn()).contains(&lbn));
        (!remapped).then_some(lbn)
    }

    /// The LBN the table (without remaps) puts at `physical`.
    pub fn table_lbn_at(&self, physical: PhysicalSector) -> Option<u64> {
        let position = self.find_in_node(self.root, i64::from(physical.cylinder), 0.0, &physical, 0)?;
        let lbn = self.slips.to_logical(position)?;
        (lbn < self.lbn_count).then_some(lbn)
    }

    fn find_in_node(
        &self,
        node: usize,
        cylinder: i64,
        angle: f64,
        target: &PhysicalSector,
        depth: usize,
    ) -> Option<u64> {
        if depth > self.nodes.len() {
            return None;
        }
        for entry in &self.nodes[node] {
            let instance_count = entry.run_lbns.checked_div(entry.instance_lbns)?;
            let direction = if entry.run_cylinders < 0 { -1 } else { 1 };
            let width = entry.instance_cylinders.max(1);
            let relative = (cylinder - entry.cylinder) * direction;
            if relative < 0 {
                continue;
            }
            let instance = relative / width;
            if instance as u64 >= instance_count {
                continue;
            }
            // Same association as `locate`, so both floor to the same first sector.
            let instance_angle = angle + (entry.angle + instance as f64 * entry.skew);
            let base = entry.lbn + instance as u64 * entry.instance_lbns;
            let child_cylinder = cylinder - (entry.cylinder + direction * instance * entry.instance_cylinders);
            match entry.child {
                G4Child::Index(child) => {
                    if let Some(found) = self.find_in_node(child, child_cylinder, instance_angle, target, depth + 1) {
                        return Some(base + found);
                    }
                }
                G4Child::Track(pattern_index) => {
                    if child_cylinder != 0 || entry.surface != target.surface {
                        continue;
                    }
                    let pattern = self.patterns[pattern_index];
                    let spt = u64::from(pattern.sectors_per_track);
                    if u64::from(target.sector) >= spt {
                        return None;
                    }
                    let first_sector = (fraction(instance_angle) * spt as f64) as u64;
                    let on_track =
                        (u64::from(target.sector) + 2 * spt - first_sector - u64::from(pattern.first_sector)) % spt;
                    if on_track < entry.instance_lbns {
                        return Some(base + on_track);
                    }
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slip_table_round_trips() {
        let slips = SlipTable::new(vec![(5, 1), (10, 2)]);
        let physical: Vec<u64> = (0..12).map(|logical| slips.to_physical(logical)).collect();
        assert_eq!(physical, vec![0, 1, 2, 3, 4, 6, 7, 8, 9, 12, 13, 14]);
        for (logical, &position) in physical.iter().enumerate() {
            assert_eq!(slips.to_logical(position), Some(logical as u64));
        }
        assert_eq!(slips.to_logical(5), None);
        assert_eq!(slips.to_logical(11), None);
        assert_eq!(slips.slipped_in(0, 20), 3);
        assert_eq!(slips.slipped_in(6, 11), 1);
    }

    fn zone(first: u32, last: u32, spt: u32, spares: u64, slips: Vec<(u64, u64)>) -> G1Zone {
        G1Zone {
            first_cylinder: first,
            last_cylinder: last,
            sectors_per_track: spt,
            first_block_offset_sectors: 3.0,
            empty_front_sectors: 0,
            track_skew_sectors: 2.0,
            cylinder_skew_sectors: 5.0,
            spare_count: spares,
            slips: SlipTable::new(slips),
            slipped_tracks: SlipTable::default(),
            period_slips: Vec::new(),
            defects: DefectTable::default(),
            first_lbn: 0,
            lbn_count: 0,
        }
    }

    /// The LBNs before and after `lbn` on its track agree with its neighbour's.
    fn check_track_neighbours(layout: &Layout, lbn: u64, located: &Located) {
        let Some(previous) = lbn.checked_sub(1).and_then(|previous| layout.locate(previous)) else {
            assert_eq!(located.lbns_before_on_track, 0, "lbn {lbn}");
            return;
        };
        if (previous.cylinder, previous.surface) == (located.cylinder, located.surface) {
            assert_eq!(located.lbns_before_on_track, previous.lbns_before_on_track + 1, "lbn {lbn}");
            assert_eq!(located.lbns_left_on_track + 1, previous.lbns_left_on_track, "lbn {lbn}");
        } else {
            assert_eq!(located.lbns_before_on_track, 0, "lbn {lbn}");
            assert_eq!(previous.lbns_left_on_track, 1, "lbn {lbn}");
        }
    }

    #[test]
    fn g4_track_neighbours_agree_on_the_cheetah15k5() {
        let model = crate::DiskModel::builtin("cheetah15k5").unwrap();
        let count = model.sector_count();
        for start in [0, 1_000_000, count / 2, count - 20_000] {
            for lbn in start..start + 20_000 {
                check_track_neighbours(&model.layout, lbn, &model.layout.locate(lbn).unwrap());
            }
        }
    }

    /// Every LBN maps to a distinct sector and back; returns each LBN's location.
    fn assert_round_trips(layout: &G1Layout) -> Vec<Located> {
        let mut seen = std::collections::HashSet::new();
        (0..layout.capacity())
            .map(|lbn| {
                let located = layout.locate(lbn).unwrap();
                let physical =
                    PhysicalSector { cylinder: located.cylinder, surface: located.surface, sector: located.sector };
                assert!(seen.insert(physical), "lbn {lbn} collides at {physical:?}");
                assert_eq!(layout.physical_to_lbn(physical), Some(lbn), "lbn {lbn}");
                located
            })
            .collect()
    }

    #[test]
    fn slips_under_period_sparing_stay_within_their_period() {
        // 10 sectors per track, 2 spares at the end of each track, 2 surfaces;
        // physical zone position 3 (track 0) is slipped.
        let sparing = Sparing::Periodic { period_kind: Period::Track, at_front: false, slips_use_spares: true };
        let layout = G1Layout::new(2, MappingScheme::Traditional, sparing, vec![zone(0, 3, 10, 2, vec![(3, 1)])]);
        assert_eq!(layout.capacity(), 8 * 8, "the slip takes a spare, not an LBN");
        let on_track_0: Vec<u32> = (0..8).map(|lbn| layout.locate(lbn).unwrap().sector).collect();
        // Skew of track 0 is the first-block offset, 3 sectors.
        assert_eq!(on_track_0, vec![3, 4, 5, 7, 8, 9, 0, 1], "LBNs from 3 on move past the slip");
        let first_of_track_1 = layout.locate(8).unwrap();
        assert_eq!((first_of_track_1.cylinder, first_of_track_1.surface), (0, 1));
        // Track 1 starts its period afresh; its skew is the offset, one track
        // skew and one sector for the slip before it: 3 + 2 + 1.
        assert_eq!(first_of_track_1.sector, 6);
        assert_eq!(layout.locate(2).unwrap().lbns_left_on_track, 6);
        assert_eq!(layout.locate(3).unwrap().lbns_before_on_track, 3);
        assert_round_trips(&layout);
    }

    #[test]
    fn remapped_sectors_move_alone_to_their_spares() {
        // 20 sectors per track, 2 spares at the end of each track, 3 surfaces.
        let sparing = Sparing::Periodic { period_kind: Period::Track, at_front: false, slips_use_spares: true };
        let plain = G1Layout::new(3, MappingScheme::Traditional, sparing, vec![zone(0, 6, 20, 2, vec![])]);
        let mut defective = zone(0, 6, 20, 2, vec![]);
        // Position 5 (LBN 5) to its track's spare 18; position 47 (LBN 43, track 2)
        // to track 0's spare 19; position 19 is a spare already: moves nothing.
        defective.defects = DefectTable::new(vec![(5, 18), (47, 19), (39, 59)]);
        let remapped = G1Layout::new(3, MappingScheme::Traditional, sparing, vec![defective]);
        assert_eq!(remapped.zones[0].defects.pairs(), &[(5, 18), (47, 19)], "the spare-to-spare pair is dropped");
        assert_eq!(remapped.unusable_replacement(), None);
        let before = assert_round_trips(&plain);
        let after = assert_round_trips(&remapped);
        for lbn in 0..plain.capacity() as usize {
            let moved = (before[lbn].cylinder, before[lbn].surface, before[lbn].sector)
                != (after[lbn].cylinder, after[lbn].surface, after[lbn].sector);
            assert_eq!(moved, lbn == 5 || lbn == 43, "lbn {lbn}");
        }
        // LBN 5 sits on sector 18 + skew of track 0: 3 (first-block offset) → 21 mod 20.
        assert_eq!((after[5].cylinder, after[5].surface, after[5].sector), (0, 0, 1));
        assert_eq!((after[5].lbns_left_on_track, after[5].lbns_before_on_track), (1, 0));
        // The run of track 0 stops before LBN 5 and resumes after it.
        assert_eq!((after[4].lbns_left_on_track, after[6].lbns_before_on_track), (1, 0));
        assert_eq!((after[0].lbns_left_on_track, after[17].lbns_before_on_track), (5, 11));
        // LBN 43 lands on track 0 (cylinder 0, surface 0).
        assert_eq!((after[43].cylinder, after[43].surface), (0, 0));
        // The defective sectors themselves hold nothing.
        let natural =
            PhysicalSector { cylinder: before[5].cylinder, surface: before[5].surface, sector: before[5].sector };
        assert_eq!(remapped.physical_to_lbn(natural), None);
    }

    #[test]
    fn remapped_tracks_move_whole_to_spare_tracks() {
        // Two spare tracks at the end of the zone (7 cylinders x 3 surfaces = 21 tracks).
        let mut defective = zone(0, 6, 20, 2, vec![]);
        defective.defects = DefectTable::new(vec![(4, 20)]);
        let remapped = G1Layout::new(3, MappingScheme::Traditional, Sparing::TracksAtZoneEnd, vec![defective]);
        assert_eq!(remapped.unusable_replacement(), None);
        let after = assert_round_trips(&remapped);
        // Track 4 (LBNs 80..100) now lives on track 20: cylinder 6, surface 2.
        for located in &after[80..100] {
            assert_eq!((located.cylinder, located.surface), (6, 2));
        }
        assert_eq!(after[80].lbns_left_on_track, 20);
        // A replacement that holds data is refused.
        let mut clashing = zone(0, 6, 20, 2, vec![]);
        clashing.defects = DefectTable::new(vec![(4, 5)]);
        let layout = G1Layout::new(3, MappingScheme::Traditional, Sparing::TracksAtZoneEnd, vec![clashing]);
        assert_eq!(layout.unusable_replacement(), Some((0, 4, 5)));
    }

    #[test]
    fn g1_round_trips_under_every_scheme() {
        let sparings = [
            Sparing::None,
            Sparing::TracksAtZoneEnd,
            Sparing::Periodic { period_kind: Period::Track, at_front: false, slips_use_spares: true },
            Sparing::Periodic { period_kind: Period::Cylinder, at_front: true, slips_use_spares: false },
            Sparing::Periodic { period_kind: Period::CylinderRange(3), at_front: false, slips_use_spares: true },
            Sparing::Periodic { period_kind: Period::Zone, at_front: false, slips_use_spares: true },
        ];
        let mappings =
            [MappingScheme::Traditional, MappingScheme::SerpentinePerZone, MappingScheme::SerpentineByParity];
        for sparing in sparings {
            for mapping in mappings {
                let zones = vec![zone(0, 6, 20, 2, vec![(7, 1), (30, 1)]), zone(7, 12, 16, 1, vec![])];
                let layout = G1Layout::new(3, mapping, sparing, zones);
                let mut seen = std::collections::HashSet::new();
                for lbn in 0..layout.capacity() {
                    let located = layout.locate(lbn).unwrap();
                    let physical =
                        PhysicalSector { cylinder: located.cylinder, surface: located.surface, sector: located.sector };
                    assert!(seen.insert(physical), "{sparing:?} {mapping:?} lbn {lbn} collides");
                    check_track_neighbours(&Layout::G1(layout.clone()), lbn, &located);
                    assert_eq!(layout.physical_to_lbn(physical), Some(lbn), "{sparing:?} {mapping:?} lbn {lbn}");
                }
                assert!(layout.locate(layout.capacity()).is_none());
            }
        }
    }
}

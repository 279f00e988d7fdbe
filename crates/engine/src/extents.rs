//! The active extents: the extent table (one record per extent: name, size,
//! the root of its map, the ranges reserved for its first writes), each
//! extent's block map in memory, the index from names to ids, the index of
//! reservations by range, and the next id to hand out.
//!
//! Invariants: every extent has exactly one record, one map and one name, and
//! no two extents share a name; ids are never reused (`next_id` only grows);
//! no two extents' reservations share a range, and the reservation index
//! holds exactly the records' reservations.
//! No I/O: the table and maps are persisted by the CP (`checkpoint.rs`),
//! which reaches them through [`Extents::table_mut`] and [`Extents::map_mut`].
//!
//! A map can change only through [`Extents::map_mut`], so the maps handed out
//! since the last CP and since the last bound refresh are remembered: the CP
//! and the bound on its size visit those maps, not every extent, and cost what
//! changed rather than the volume's size.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::codec::{ExtentRecord, RangeReservation};
use crate::map::ExtentMap;
use crate::tree::PersistentTree;

/// The active extents.
#[derive(Debug)]
pub(crate) struct Extents {
    /// The extent table.
    table: PersistentTree<ExtentRecord>,
    /// Each extent's map, by id.
    maps: HashMap<u64, ExtentMap>,
    /// Ids by name.
    names: HashMap<String, u64>,
    /// The id the next extent gets.
    next_id: u64,
    /// Reservations by first range: `(range count, extent id)`.
    reservations: BTreeMap<u64, (u64, u64)>,
    /// Maps handed out to change (or created) since the CP last persisted them.
    unpersisted: BTreeSet<u64>,
    /// Each map's persist bound as last computed, their sum, and the maps
    /// handed out to change since ([`Extents::maps_persist_bound`]).
    bounds: MapBounds,
}

/// Cached persist bounds of the maps.
#[derive(Debug, Default)]
struct MapBounds {
    per_map: HashMap<u64, u64>,
    total: u64,
    stale: BTreeSet<u64>,
}

impl Extents {
    /// No extents; the first gets id 1.
    pub(crate) fn new() -> Self {
        Self {
            table: PersistentTree::new(0),
            maps: HashMap::new(),
            names: HashMap::new(),
            next_id: 1,
            reservations: BTreeMap::new(),
            unpersisted: BTreeSet::new(),
            bounds: MapBounds::default(),
        }
    }

    /// Extents loaded from a CP (or adopted from a snapshot): the table and a
    /// map for each of its records. A reservation sharing a range with one of
    /// a lower id is dropped (an extent restored from a snapshot may carry one
    /// that was released and given to another since); a volume that was not
    /// restored has none such (fsck reports them).
    pub(crate) fn loaded(table: PersistentTree<ExtentRecord>, maps: HashMap<u64, ExtentMap>, next_id: u64) -> Self {
        let names: HashMap<String, u64> = table.iter().map(|(id, record)| (record.name.clone(), id)).collect();
        assert_eq!(maps.len(), table.len(), "every extent has a map");
        for (id, _) in table.iter() {
            assert!(maps.contains_key(&id), "extent #{id} has a map");
            assert!(id < next_id, "extent ids are below the next id");
        }
        let reserved: Vec<(u64, RangeReservation)> =
            table.iter().filter_map(|(id, record)| record.reservation.map(|reservation| (id, reservation))).collect();
        let bounds = MapBounds { stale: maps.keys().copied().collect(), ..MapBounds::default() };
        let unpersisted = maps.iter().filter(|(_, map)| map.is_dirty()).map(|(&id, _)| id).collect();
        let mut extents = Self { table, maps, names, next_id, reservations: BTreeMap::new(), unpersisted, bounds };
        for (id, reservation) in reserved {
            if extents.overlapping_reservation(&reservation).is_none() {
                extents.reservations.insert(reservation.first_range, (reservation.range_count, id));
            } else {
                extents.set_reservation(id, None);
            }
        }
        extents
    }

    /// Creates an extent; returns its id.
    pub(crate) fn create(&mut self, record: ExtentRecord) -> u64 {
        assert!(!self.names.contains_key(&record.name), "extent names are unique");
        assert!(record.reservation.is_none(), "a new extent has nothing reserved yet");
        let id = self.next_id;
        self.next_id += 1;
        self.names.insert(record.name.clone(), id);
        self.maps.insert(id, ExtentMap::new(id));
        self.unpersisted.insert(id);
        self.bounds.stale.insert(id);
        self.table.insert(id, record);
        id
    }

    /// Removes extent `id`; returns its map (the caller frees its blocks).
    pub(crate) fn remove(&mut self, id: u64) -> ExtentMap {
        let record = self.table.get(id).expect("the extent exists").clone();
        let removed = self.names.remove(&record.name);
        assert_eq!(removed, Some(id), "the name names the extent");
        if let Some(reservation) = record.reservation {
            self.reservations.remove(&reservation.first_range);
        }
        self.table.remove(id);
        self.unpersisted.remove(&id);
        self.bounds.stale.remove(&id);
        self.bounds.total -= self.bounds.per_map.remove(&id).unwrap_or(0);
        self.maps.remove(&id).expect("every extent has a map")
    }

    /// The id the next extent gets.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id
    }

    /// The id of the extent named `name`.
    pub(crate) fn id_of(&self, name: &str) -> Option<u64> {
        self.names.get(name).copied()
    }

    /// The record of extent `id`.
    pub(crate) fn record(&self, id: u64) -> Option<&ExtentRecord> {
        self.table.get(id)
    }

    /// Replaces the record of extent `id` (its size, or its map's root; its
    /// reservation changes through [`Extents::set_reservation`]).
    pub(crate) fn set_record(&mut self, id: u64, record: ExtentRecord) {
        let current = self.table.get(id).expect("the extent exists");
        assert_eq!(current.name, record.name, "a record update keeps the name");
        assert_eq!(current.reservation, record.reservation, "a record update keeps the reservation");
        self.table.insert(id, record);
    }

    /// Reserves `reservation` for extent `id` (`None`: releases its
    /// reservation), which no other extent's reservation overlaps.
    pub(crate) fn set_reservation(&mut self, id: u64, reservation: Option<RangeReservation>) {
        let mut record = self.table.get(id).expect("the extent exists").clone();
        if record.reservation == reservation {
            return;
        }
        if let Some(old) = record.reservation {
            let removed = self.reservations.remove(&old.first_range);
            debug_assert_eq!(removed, Some((old.range_count, id)), "the index holds the record's reservation");
        }
        if let Some(new) = reservation {
            assert!(new.range_count > 0, "a reservation holds a range");
            assert_eq!(self.overlapping_reservation(&new), None, "reservations share no range");
            self.reservations.insert(new.first_range, (new.range_count, id));
        }
        record.reservation = reservation;
        self.table.insert(id, record);
    }

    /// The reservation of extent `id`, if it exists and has one.
    pub(crate) fn reservation(&self, id: u64) -> Option<RangeReservation> {
        self.table.get(id).and_then(|record| record.reservation)
    }

    /// The extent whose reservation holds allocation range `range`.
    pub(crate) fn reservation_owner(&self, range: u64) -> Option<u64> {
        let (&first, &(count, id)) = self.reservations.range(..=range).next_back()?;
        (range < first + count).then_some(id)
    }

    /// Every reservation, by first range: `(extent id, reservation)`.
    pub(crate) fn reservations(&self) -> impl Iterator<Item = (u64, RangeReservation)> + '_ {
        self.reservations
            .iter()
            .map(|(&first_range, &(range_count, id))| (id, RangeReservation { first_range, range_count }))
    }

    /// The extent (other than none) whose reservation shares a range with
    /// `reservation`.
    fn overlapping_reservation(&self, reservation: &RangeReservation) -> Option<u64> {
        // The last reservation starting before its end is the only candidate:
        // reservations in the index never overlap one another.
        let (&first, &(count, id)) = self.reservations.range(..reservation.end_range()).next_back()?;
        RangeReservation { first_range: first, range_count: count }.overlaps(reservation).then_some(id)
    }

    /// Every extent's id and record, by id.
    pub(crate) fn records(&self) -> impl Iterator<Item = (u64, &ExtentRecord)> {
        self.table.iter()
    }

    /// The map of extent `id`, which exists.
    pub(crate) fn map(&self, id: u64) -> &ExtentMap {
        self.maps.get(&id).expect("the extent exists")
    }

    /// The map of extent `id`, if it exists.
    pub(crate) fn find_map(&self, id: u64) -> Option<&ExtentMap> {
        self.maps.get(&id)
    }

    /// The map of extent `id`, which exists, to change.
    pub(crate) fn map_mut(&mut self, id: u64) -> &mut ExtentMap {
        let map = self.maps.get_mut(&id).expect("the extent exists");
        self.unpersisted.insert(id);
        self.bounds.stale.insert(id);
        map
    }

    /// The ids of the maps a CP must persist (the dirty ones), ascending.
    pub(crate) fn maps_to_persist(&self) -> Vec<u64> {
        debug_assert!(
            self.maps.iter().all(|(id, map)| !map.is_dirty() || self.unpersisted.contains(id)),
            "every dirty map was handed out to change since the last CP"
        );
        self.unpersisted.iter().copied().filter(|id| self.maps.get(id).is_some_and(ExtentMap::is_dirty)).collect()
    }

    /// Records that the CP persisted every map [`Extents::maps_to_persist`] named.
    pub(crate) fn maps_persisted(&mut self) {
        self.unpersisted.clear();
    }

    /// The sum of the maps' [`ExtentMap::persist_bound_blocks`], recomputing
    /// only the maps handed out to change since the last call.
    pub(crate) fn maps_persist_bound(&mut self) -> u64 {
        let bounds = &mut self.bounds;
        for id in std::mem::take(&mut bounds.stale) {
            let bound = self.maps.get(&id).map_or(0, ExtentMap::persist_bound_blocks);
            let old = bounds.per_map.insert(id, bound).unwrap_or(0);
            bounds.total = bounds.total - old + bound;
        }
        debug_assert_eq!(
            bounds.total,
            self.maps.values().map(ExtentMap::persist_bound_blocks).sum::<u64>(),
            "the cached bounds are the maps' bounds"
        );
        bounds.total
    }

    /// Every map, in no particular order.
    pub(crate) fn maps(&self) -> impl Iterator<Item = (u64, &ExtentMap)> {
        self.maps.iter().map(|(&id, map)| (id, map))
    }

    /// The extent table (the CP persisting it, bounds on its growth).
    pub(crate) fn table(&self) -> &PersistentTree<ExtentRecord> {
        &self.table
    }

    /// The extent table to persist.
    pub(crate) fn table_mut(&mut self) -> &mut PersistentTree<ExtentRecord> {
        &mut self.table
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str) -> ExtentRecord {
        ExtentRecord {
            name: name.to_string(),
            size_bytes: 4096,
            map: Default::default(),
            created_generation: 1,
            reservation: None,
        }
    }

    fn ranges(first_range: u64, range_count: u64) -> RangeReservation {
        RangeReservation { first_range, range_count }
    }

    #[test]
    fn reservations_are_found_by_range_and_follow_their_extents() {
        let mut extents = Extents::new();
        let a = extents.create(record("a"));
        let b = extents.create(record("b"));
        extents.set_reservation(a, Some(ranges(10, 5)));
        extents.set_reservation(b, Some(ranges(15, 1)));
        assert_eq!(extents.reservation_owner(9), None);
        assert_eq!(extents.reservation_owner(10), Some(a));
        assert_eq!(extents.reservation_owner(14), Some(a));
        assert_eq!(extents.reservation_owner(15), Some(b));
        assert_eq!(extents.reservation_owner(16), None);
        assert_eq!(extents.reservation(a), Some(ranges(10, 5)));
        extents.set_reservation(a, Some(ranges(0, 2)));
        assert_eq!(extents.reservation_owner(12), None);
        assert_eq!(extents.reservation_owner(1), Some(a));
        extents.remove(b);
        assert_eq!(extents.reservation_owner(15), None);
        assert_eq!(extents.reservations().collect::<Vec<_>>(), vec![(a, ranges(0, 2))]);
        extents.set_reservation(a, None);
        assert_eq!(extents.reservations().count(), 0);
        assert_eq!(extents.record(a).unwrap().reservation, None);
    }

    #[test]
    #[should_panic(expected = "reservations share no range")]
    fn two_extents_never_reserve_one_range() {
        let mut extents = Extents::new();
        let a = extents.create(record("a"));
        let b = extents.create(record("b"));
        extents.set_reservation(a, Some(ranges(10, 5)));
        extents.set_reservation(b, Some(ranges(3, 8)));
    }

    #[test]
    fn loading_drops_a_reservation_that_overlaps_an_older_extents() {
        let mut table = PersistentTree::new(0);
        let mut maps = HashMap::new();
        for (id, name, reservation) in [(1, "a", ranges(10, 5)), (2, "b", ranges(12, 5)), (3, "c", ranges(20, 1))] {
            table.insert(id, ExtentRecord { reservation: Some(reservation), ..record(name) });
            maps.insert(id, ExtentMap::new(id));
        }
        let extents = Extents::loaded(table, maps, 4);
        assert_eq!(extents.reservations().collect::<Vec<_>>(), vec![(1, ranges(10, 5)), (3, ranges(20, 1))]);
        assert_eq!(extents.record(2).unwrap().reservation, None);
    }

    #[test]
    fn ids_grow_and_names_find_their_extents() {
        let mut extents = Extents::new();
        let a = extents.create(record("a"));
        let b = extents.create(record("b"));
        assert_eq!((a, b), (1, 2));
        assert_eq!(extents.id_of("b"), Some(b));
        extents.remove(a);
        assert_eq!(extents.id_of("a"), None);
        assert!(extents.find_map(a).is_none());
        assert_eq!(extents.create(record("a")), 3);
        assert_eq!(extents.next_id(), 4);
        assert_eq!(extents.records().count(), 2);
    }

    #[test]
    #[should_panic(expected = "extent names are unique")]
    fn a_name_is_never_taken_twice() {
        let mut extents = Extents::new();
        extents.create(record("a"));
        extents.create(record("a"));
    }

    /// The maps' persist bounds and dirtiness, recomputed from every map.
    fn full_scan(extents: &Extents) -> (u64, Vec<u64>) {
        let bound = extents.maps().map(|(_, map)| map.persist_bound_blocks()).sum();
        let mut dirty: Vec<u64> = extents.maps().filter(|(_, map)| map.is_dirty()).map(|(id, _)| id).collect();
        dirty.sort_unstable();
        (bound, dirty)
    }

    #[test]
    fn the_maps_to_persist_and_their_bound_follow_every_change() {
        use crate::codec::Run;
        use crate::tree::tests::MemoryStore;
        let mut extents = Extents::new();
        let mut store = MemoryStore::default();
        let check = |extents: &mut Extents| {
            let (bound, dirty) = full_scan(extents);
            assert_eq!(extents.maps_persist_bound(), bound);
            assert_eq!(extents.maps_to_persist(), dirty);
        };
        let ids: Vec<u64> = (0..6).map(|index| extents.create(record(&format!("e{index}")))).collect();
        check(&mut extents);
        // Enough runs in some maps for several leaves and an index level.
        for (step, &id) in ids.iter().enumerate().cycle().take(4000).map(|(step, id)| (step as u64, id)) {
            if id % 3 != 0 {
                extents.map_mut(id).insert(step * 7, Run::new(1, step));
            }
            if step % 500 == 0 {
                check(&mut extents);
            }
        }
        check(&mut extents);
        // A CP persists exactly the dirty maps, after which none is left to persist.
        for id in extents.maps_to_persist() {
            extents.map_mut(id).persist(&mut store).unwrap();
        }
        extents.maps_persisted();
        check(&mut extents);
        assert!(extents.maps_to_persist().is_empty());
        // A change to one map after the CP, a removal, a new extent (whose
        // empty map has nothing to persist until it changes).
        extents.map_mut(ids[1]).remove(7);
        drop(extents.remove(ids[2]));
        let added = extents.create(record("added"));
        check(&mut extents);
        assert_eq!(extents.maps_to_persist(), vec![ids[1]]);
        extents.map_mut(added).insert(0, Run::new(1, 1));
        // A map handed out but left unchanged is not persisted.
        let _ = extents.map_mut(ids[4]);
        assert_eq!(extents.maps_to_persist(), vec![ids[1], added]);
        check(&mut extents);
    }
}

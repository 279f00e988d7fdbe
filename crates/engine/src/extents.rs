//! The active extents: the extent table (one record per extent: name, size,
//! the root of its map), each extent's block map in memory, the index from
//! names to ids, and the next id to hand out.
//!
//! Invariants: every extent has exactly one record, one map and one name, and
//! no two extents share a name; ids are never reused (`next_id` only grows).
//! No I/O: the table and maps are persisted by the CP (`checkpoint.rs`),
//! which reaches them through [`Extents::table_mut`] and [`Extents::map_mut`].

use std::collections::HashMap;

use crate::codec::ExtentRecord;
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
}

impl Extents {
    /// No extents; the first gets id 1.
    pub(crate) fn new() -> Self {
        Self { table: PersistentTree::new(0), maps: HashMap::new(), names: HashMap::new(), next_id: 1 }
    }

    /// Extents loaded from a CP (or adopted from a snapshot): the table and a
    /// map for each of its records.
    pub(crate) fn loaded(table: PersistentTree<ExtentRecord>, maps: HashMap<u64, ExtentMap>, next_id: u64) -> Self {
        let names: HashMap<String, u64> = table.iter().map(|(id, record)| (record.name.clone(), id)).collect();
        assert_eq!(maps.len(), table.len(), "every extent has a map");
        for (id, _) in table.iter() {
            assert!(maps.contains_key(&id), "extent #{id} has a map");
            assert!(id < next_id, "extent ids are below the next id");
        }
        Self { table, maps, names, next_id }
    }

    /// Creates an extent; returns its id.
    pub(crate) fn create(&mut self, record: ExtentRecord) -> u64 {
        assert!(!self.names.contains_key(&record.name), "extent names are unique");
        let id = self.next_id;
        self.next_id += 1;
        self.names.insert(record.name.clone(), id);
        self.maps.insert(id, ExtentMap::new(id));
        self.table.insert(id, record);
        id
    }

    /// Removes extent `id`; returns its map (the caller frees its blocks).
    pub(crate) fn remove(&mut self, id: u64) -> ExtentMap {
        let record = self.table.get(id).expect("the extent exists").clone();
        let removed = self.names.remove(&record.name);
        assert_eq!(removed, Some(id), "the name names the extent");
        self.table.remove(id);
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

    /// Replaces the record of extent `id` (its size, or its map's root).
    pub(crate) fn set_record(&mut self, id: u64, record: ExtentRecord) {
        let current = self.table.get(id).expect("the extent exists");
        assert_eq!(current.name, record.name, "a record update keeps the name");
        self.table.insert(id, record);
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
        self.maps.get_mut(&id).expect("the extent exists")
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
        ExtentRecord { name: name.to_string(), size_bytes: 4096, map: Default::default(), created_generation: 1 }
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
}

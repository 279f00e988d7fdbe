//! The copy-on-write data layout engine: volumes, extents, consistency points, snapshots, free space, layouts, recovery and fsck.

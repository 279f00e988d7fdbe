//! Seed 003, the reallocate-on-read talk: a write-anywhere volume scatters
//! files under random updates; rewriting what a reader has just read, in
//! order, fixes the layout where it is used.
//!
//! - [`realloc_on_read`]: `reproduce realloc-on-read`, the talk's read-side
//!   table (mean physical read per pass, with and without reallocation).

pub mod realloc_on_read;

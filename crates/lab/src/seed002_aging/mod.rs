//! Seed 002's file-system aging paper: small appends and overwrites scatter
//! what a reader later reads in order, and a layout score computed from the
//! disk's requests predicts how much slower the read gets.
//!
//! - [`layout_score`]: the dynamic layout score of a device's request stream
//!   and the Pearson correlation (both pure).
//! - [`natural_transfer`]: a drive model's effective bandwidth against read
//!   size and its natural transfer size.
//! - [`aging`]: `reproduce aging`, interleaved-append and random-overwrite
//!   aging rounds under each layout, the layout scores against the
//!   serial-read cost, and the natural transfer size curve.
//!
//! The static (Smith–Seltzer) layout score of an extent's map is the
//! engine's (`proxima_engine::map::layout_score`), as `proxima status`
//! reports it.

pub mod aging;
pub mod layout_score;
pub mod natural_transfer;

//! Seed 001, HyLog (FAST'04): a log-structured layout pays for cleaning,
//! an update-in-place one for positioning; logging only the hot pages and
//! overwriting the cold ones gets the better of both. The paper's equations
//! were lost from its text and are rebuilt in `hylog-model.md`.
//!
//! - [`cost_model`]: the write-cost model, Eqs 1–8, arrays and write skews.
//! - [`engine_write_cost`]: an engine volume's overall write cost under a
//!   synthetic update workload (the hook the cleaning experiments use).
//! - [`paper`]: the paper's disks and the inputs and printed results of its
//!   §6.2 worked examples.
//! - [`section_6_2`]: those examples recomputed by the model.
//! - [`hylog_model`]: `reproduce hylog-model`, Figures 1 and 3 and §6.2.
//! - [`hylog_cleaning`]: `reproduce hylog-cleaning`, Figures 2 and 5 and
//!   the cross-check of the engine against the segment simulator.
//! - [`hylog_proximal`]: `reproduce hylog-proximal`, the `proximal-hot`
//!   layout against proximal under 80/20 updates.
//! - [`hylog_table3`]: `reproduce hylog-table3`, Table 3: TPC-B on
//!   Overwrite and LFS without and with cleaning, on one drive.
//! - [`hylog_throughput`]: `reproduce hylog-throughput`, Figures 6 to 9:
//!   TPC-C throughput of every layout on disk arrays.
//! - [`database`]: a database's pages on an engine extent: the serial load
//!   and the buffer pool's page I/O.
//! - [`tpcb_volume`]: TPC-B's closed loop on an engine volume over one
//!   simulated drive.
//! - [`tpcc_array`]: TPC-C's users on an engine volume over a disk array,
//!   the engine's I/O recorded and timed on simulated drives.
//! - [`cleaning_figures`]: Figures 2 and 5 on that simulator.
//! - [`segment_simulator`]: an independent segment-accounting simulator of
//!   a log-structured layout and its cleaning policies (Figures 2 and 5).

pub mod cleaning_figures;
pub mod cost_model;
pub mod database;
pub mod engine_write_cost;
pub mod hylog_cleaning;
pub mod hylog_model;
pub mod hylog_proximal;
pub mod hylog_table3;
pub mod hylog_throughput;
pub mod paper;
pub mod section_6_2;
pub mod segment_simulator;
pub mod tpcb_volume;
pub mod tpcc_array;

//! The immutable drive model: built from a parsed DiskSim 4.0 `.parv` (the disk
//! instance found in the topology, its `.diskspecs` block, its `dm_disk` model
//! with G1 or G4 layout and G1 mechanics, and the buses and controller it hangs
//! from) or from a built-in. Overrides (`disk0:Parameter=value`) are applied to
//! the parsed blocks before the model is built, as DiskSim's command line does.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use crate::mapping::{
    DefectTable, G1Layout, G1Zone, G4Child, G4Entry, G4Layout, G4Remap, Layout, Located, MappingScheme, Period,
    PhysicalSector, SlipTable, Sparing, TrackExtent, TrackPattern,
};
use crate::params::{self, Block, DirectorySource, Document, EmbeddedSource, FileSource, Location, Value, ValueKind};
use crate::seek::SeekCurve;
use crate::{DiskOp, LoadError, Nanos, Scheduler};

const NANOS_PER_MS: f64 = 1.0e6;

/// One DiskSim-style override: `COMPONENT:PARAMETER=VALUE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    /// Instance name, such as `disk0`.
    pub component: String,
    /// Parameter name as in the parameter file, such as `Enable caching in buffer`.
    pub parameter: String,
    /// The new value, as text.
    pub value: String,
}

impl Override {
    /// Parses `disk0:Enable caching in buffer=0`.
    pub fn parse(text: &str) -> Result<Override, LoadError> {
        let bad = |message: &str| LoadError::BadOverride { text: text.to_string(), message: message.to_string() };
        let (component, rest) = text.split_once(':').ok_or_else(|| bad("expected COMPONENT:PARAMETER=VALUE"))?;
        let (parameter, value) = rest.rsplit_once('=').ok_or_else(|| bad("expected `=` before the value"))?;
        let (component, parameter, value) = (component.trim(), parameter.trim(), value.trim());
        if component.is_empty() || parameter.is_empty() || value.is_empty() {
            return Err(bad("component, parameter and value must all be non-empty"));
        }
        if value.contains(|c: char| c.is_whitespace() || "{}[],=#".contains(c)) {
            return Err(bad("the value must be a single number or word"));
        }
        let parameter = parameter.split_whitespace().collect::<Vec<_>>().join(" ");
        Ok(Override { component: component.to_string(), parameter, value: value.to_string() })
    }
}

/// The drive's command overheads, in nanoseconds (from `.diskspecs`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Overheads {
    /// Read served from the cache, previous command a read / a write.
    pub read_hit_ns: [f64; 2],
    /// Read needing the medium, previous command a read / a write.
    pub read_miss_ns: [f64; 2],
    /// Write fully absorbed by the cache, previous command a read / a write.
    pub write_hit_ns: [f64; 2],
    /// Write needing the medium, previous command a read / a write.
    pub write_miss_ns: [f64; 2],
    /// Added at the end of every read.
    pub read_completion_ns: f64,
    /// Added at the end of every write.
    pub write_completion_ns: f64,
    /// `Data preparation overhead`: once the drive holds the bus, before data
    /// cross it (reads and writes).
    pub data_preparation_ns: f64,
    /// `First reselect overhead`: reconnecting to the host for the first time
    /// in a request, before the bus is used again.
    pub reselect_first_ns: f64,
    /// `Other reselect overhead`: later reconnections in the same request.
    pub reselect_other_ns: f64,
    /// `Read disconnect afterread` / `afterwrite`: a read miss releasing the
    /// bus, previous command a read / a write.
    pub read_disconnect_ns: [f64; 2],
    /// `Write disconnect overhead`: a write releasing the bus once its data
    /// are buffered.
    pub write_disconnect_ns: f64,
    /// `Extra write disconnect` with its five overheads, when enabled.
    pub extra_write_disconnect: Option<ExtraWriteDisconnect>,
}

/// DiskSim's `Extra write disconnect`: the drive disconnects after a write
/// command, before taking any data, and reconnects later (nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ExtraWriteDisconnect {
    /// `Extradisc command overhead`: replaces the write command overheads.
    pub command_ns: f64,
    /// `Extradisc disconnect overhead`: after the command, before the bus is released.
    pub disconnect_ns: f64,
    /// `Extradisc inter-disconnect delay`: from the release to the reconnection attempt.
    pub inter_disconnect_ns: f64,
    /// `Extradisc 2nd disconnect overhead`: releasing the bus once the data are buffered.
    pub second_disconnect_ns: f64,
    /// `Extradisc seek delta`: from the command's end to the start of positioning.
    pub seek_delta_ns: f64,
}

/// The segmented buffer cache's parameters (from `.diskspecs`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CacheParams {
    /// `Enable caching in buffer`: reads may hit data left in segments.
    pub enabled: bool,
    /// `Number of buffer segments`.
    pub segment_count: u32,
    /// `Segment size (in blks)`.
    pub segment_size_sectors: u32,
    /// `Fast write level`: 0 write-through; 1 and 2 write-back (dirty data flushed
    /// before the next command is serviced).
    pub fast_write_level: u32,
    /// `Buffer continuous read`: 0 none; 1 to end of track; 2 to end of cylinder;
    /// 3 until the segment is full; 4 to end of the following track.
    pub continuous_read: u32,
    /// `Immed transfer partial hit`: a read whose first sectors are buffered,
    /// the rest still being read ahead, is served from the read-ahead stream.
    pub immediate_partial_hits: bool,
    /// `Stop prefetch in sector`: read-ahead may stop in the middle of a
    /// sector (else the sector under way is read to its end first).
    pub stop_prefetch_in_sector: bool,
    /// `Read-ahead on idle hit`: a read served whole from the cache restarts
    /// read-ahead.
    pub read_ahead_on_idle_hit: bool,
    /// `Minimum read-ahead (blks)`.
    pub read_ahead_min_sectors: u32,
    /// `Maximum read-ahead (blks)`.
    pub read_ahead_max_sectors: u32,
    /// `Read any free blocks`: sectors passing under the head before the target are cached.
    pub read_any_free_blocks: bool,
    /// `Immediate buffer read`: zero-latency reads (read-on-arrival).
    pub immediate_read: bool,
    /// `Immediate buffer write`: zero-latency writes.
    pub immediate_write: bool,
    /// `Allow read hits on write data`.
    pub read_hits_on_write_data: bool,
    /// `Use separate write segment`: one segment holds all write data, the
    /// others serve reads.
    pub separate_write_segment: bool,
    /// `Allow almost read hits`: a read whose data are still being read ahead is
    /// served from the read-ahead stream (else it is handled as a miss).
    pub almost_read_hits: bool,
    /// `Read-ahead over requested`: read-ahead may overwrite the data just
    /// returned, so a segment keeps only its most recent `segment size` sectors.
    pub read_ahead_over_requested: bool,
    /// `High (read) water mark`, as a fraction.
    pub high_water_mark: f64,
    /// `Set watermark by reqsize`: the water mark is a fraction of the request
    /// (else of the segment).
    pub water_mark_by_request_size: bool,
}

/// An immutable drive model.
#[derive(Debug, Clone, PartialEq)]
pub struct DiskModel {
    pub(crate) name: String,
    pub(crate) sector_count: u64,
    pub(crate) surface_count: u32,
    pub(crate) cylinder_count: u32,
    pub(crate) rpm: f64,
    pub(crate) revolution_ns_exact: f64,
    pub(crate) layout: Layout,
    pub(crate) seek: SeekCurve,
    /// `seek` evaluated at every distance below the cylinder count, so that the
    /// timing path (SPTF evaluates every queued request) does no search.
    pub(crate) seek_ns_by_distance: Vec<f64>,
    pub(crate) head_switch_ns_exact: f64,
    pub(crate) write_settle_ns_exact: f64,
    pub(crate) max_queue_length: usize,
    pub(crate) scheduler: Scheduler,
    pub(crate) overheads: Overheads,
    /// Time to move one sector to the host over the slowest of disk, bus and
    /// controller (reads).
    pub(crate) bus_read_sector_ns: f64,
    /// The same from the host (writes).
    pub(crate) bus_write_sector_ns: f64,
    /// `Minimum seek delay`: a write that does not continue a media access
    /// still under way reaches the medium no sooner than this after its
    /// command overhead.
    pub(crate) minimum_seek_delay_ns: f64,
    /// `Never disconnect`: the drive keeps the bus from arrival to completion,
    /// so no disconnect or reselect overheads apply.
    pub(crate) never_disconnect: bool,
    /// `Hold bus entire read xfer`: once reconnected, a read keeps the bus and
    /// sends each sector as soon as it is buffered.
    pub(crate) hold_bus_for_reads: bool,
    pub(crate) cache: CacheParams,
    /// Access time when the mechanics are `constant` (DiskSim's constant access).
    pub(crate) constant_access_ns: Option<f64>,
    /// Whether rotational latency is replaced by half a revolution (`averageRotation`).
    pub(crate) average_rotation: bool,
}

/// Names of the built-in models. `disk2003`, `disk2008` and `dsp3105` are the
/// HyLog paper's disks, generated by `models/hylog/generate_models.py`.
const BUILTIN_NAMES: [&str; 6] = ["cheetah15k5", "atlas10k", "nearline7200", "disk2003", "disk2008", "dsp3105"];

fn builtin_source(name: &str) -> Option<(EmbeddedSource, &'static str)> {
    let files: Vec<(&'static str, &'static str)> = match name {
        "cheetah15k5" => vec![
            ("Seagate-Cheetah15k5.parv", include_str!("../models/cheetah15k5/Seagate-Cheetah15k5.parv")),
            ("Seagate-Cheetah15k5.diskspecs", include_str!("../models/cheetah15k5/Seagate-Cheetah15k5.diskspecs")),
            ("Seagate-Cheetah15k5.model", include_str!("../models/cheetah15k5/Seagate-Cheetah15k5.model")),
            ("Seagate-Cheetah15k5.seeks", include_str!("../models/cheetah15k5/Seagate-Cheetah15k5.seeks")),
            (
                "Seagate-Cheetah15k5-skews.layout",
                include_str!("../models/cheetah15k5/Seagate-Cheetah15k5-skews.layout"),
            ),
        ],
        "atlas10k" => vec![
            ("atlas10k.parv", include_str!("../models/atlas10k/atlas10k.parv")),
            ("atlas10k.diskspecs", include_str!("../models/atlas10k/atlas10k.diskspecs")),
            ("atlas10k.model", include_str!("../models/atlas10k/atlas10k.model")),
            ("atlas10k.seek", include_str!("../models/atlas10k/atlas10k.seek")),
        ],
        "nearline7200" => vec![
            ("nearline7200.parv", include_str!("../models/nearline7200/nearline7200.parv")),
            ("nearline7200.diskspecs", include_str!("../models/nearline7200/nearline7200.diskspecs")),
            ("nearline7200.model", include_str!("../models/nearline7200/nearline7200.model")),
            ("nearline7200.layout", include_str!("../models/nearline7200/nearline7200.layout")),
        ],
        "disk2003" => vec![
            ("disk2003.parv", include_str!("../models/disk2003/disk2003.parv")),
            ("disk2003.diskspecs", include_str!("../models/disk2003/disk2003.diskspecs")),
            ("disk2003.model", include_str!("../models/disk2003/disk2003.model")),
            ("disk2003.seek", include_str!("../models/disk2003/disk2003.seek")),
        ],
        "disk2008" => vec![
            ("disk2008.parv", include_str!("../models/disk2008/disk2008.parv")),
            ("disk2008.diskspecs", include_str!("../models/disk2008/disk2008.diskspecs")),
            ("disk2008.model", include_str!("../models/disk2008/disk2008.model")),
            ("disk2008.seek", include_str!("../models/disk2008/disk2008.seek")),
        ],
        "dsp3105" => vec![
            ("dsp3105.parv", include_str!("../models/dsp3105/dsp3105.parv")),
            ("dsp3105.diskspecs", include_str!("../models/dsp3105/dsp3105.diskspecs")),
            ("dsp3105.model", include_str!("../models/dsp3105/dsp3105.model")),
            ("dsp3105.seek", include_str!("../models/dsp3105/dsp3105.seek")),
        ],
        _ => return None,
    };
    let parv = files[0].0;
    Some((EmbeddedSource { files: files.into_iter().collect::<HashMap<_, _>>() }, parv))
}

impl DiskModel {
    /// The names [`DiskModel::builtin`] accepts.
    pub fn builtin_names() -> &'static [&'static str] {
        &BUILTIN_NAMES
    }

    /// A built-in model, with overrides applied.
    pub fn builtin_with(name: &str, overrides: &[Override]) -> Result<DiskModel, LoadError> {
        let (source, parv) = builtin_source(name)
            .ok_or_else(|| LoadError::UnknownModel { name: name.to_string(), known: BUILTIN_NAMES.join(", ") })?;
        let mut model = load_from(&source, parv, overrides)?;
        model.name = name.to_string();
        Ok(model)
    }

    /// A built-in model: `cheetah15k5`, `atlas10k`, `nearline7200`, or the HyLog
    /// paper's `disk2003`, `disk2008` and `dsp3105`.
    pub fn builtin(name: &str) -> Result<DiskModel, LoadError> {
        DiskModel::builtin_with(name, &[])
    }

    /// Loads a DiskSim 4.0 `.parv` (and the files it sources, relative to it).
    pub fn load(parv: &Path, overrides: &[Override]) -> Result<DiskModel, LoadError> {
        let directory = parv.parent().map_or_else(|| Path::new(".").to_path_buf(), Path::to_path_buf);
        let source = DirectorySource { directory };
        let file_name = parv.file_name().map(|name| name.to_string_lossy().to_string()).unwrap_or_default();
        load_from(&source, &file_name, overrides)
    }

    /// Loads a `.parv` named `parv_name` whose files come from `source` (files
    /// in memory, an archive, a fuzzer's bytes).
    pub fn load_from_source(
        source: &dyn FileSource,
        parv_name: &str,
        overrides: &[Override],
    ) -> Result<DiskModel, LoadError> {
        load_from(source, parv_name, overrides)
    }

    /// A built-in name, or else a path to a `.parv`.
    pub fn resolve(name_or_parv_path: &str, overrides: &[Override]) -> Result<DiskModel, LoadError> {
        if BUILTIN_NAMES.contains(&name_or_parv_path) {
            return DiskModel::builtin_with(name_or_parv_path, overrides);
        }
        let path = Path::new(name_or_parv_path);
        if !path.exists() && !name_or_parv_path.contains(['/', '.']) {
            return Err(LoadError::UnknownModel {
                name: name_or_parv_path.to_string(),
                known: BUILTIN_NAMES.join(", "),
            });
        }
        DiskModel::load(path, overrides)
    }

    /// The model's name (the built-in name, or the disk block's name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Addressable sectors.
    pub fn sector_count(&self) -> u64 {
        self.sector_count
    }

    /// Bytes per sector (DiskSim models 512-byte sectors).
    pub fn sector_size_bytes(&self) -> u32 {
        512
    }

    /// Nominal rotation speed.
    pub fn rpm(&self) -> f64 {
        self.rpm
    }

    /// One revolution, rounded to the nanosecond.
    pub fn revolution_ns(&self) -> Nanos {
        self.revolution_ns_exact.round() as Nanos
    }

    /// The on-disk queue's length (`Max queue length`).
    pub fn max_queue_length(&self) -> usize {
        self.max_queue_length
    }

    /// The drive's scheduling policy.
    pub fn scheduler(&self) -> Scheduler {
        self.scheduler
    }

    /// Recording surfaces (heads).
    pub fn surface_count(&self) -> u32 {
        self.surface_count
    }

    /// Physical cylinders.
    pub fn cylinder_count(&self) -> u32 {
        self.cylinder_count
    }

    /// Cache parameters.
    pub fn cache(&self) -> CacheParams {
        self.cache
    }

    /// Where `lbn` lies, or `None` past the end.
    pub fn lbn_to_physical(&self, lbn: u64) -> Option<PhysicalSector> {
        let located = self.locate(lbn)?;
        Some(PhysicalSector { cylinder: located.cylinder, surface: located.surface, sector: located.sector })
    }

    /// The LBN stored at a physical sector, or `None` for spare, slipped or
    /// unmapped sectors.
    pub fn physical_to_lbn(&self, physical: PhysicalSector) -> Option<u64> {
        self.layout.physical_to_lbn(physical).filter(|&lbn| lbn < self.sector_count)
    }

    /// The track holding `lbn`: its consecutive LBNs and sectors per track.
    pub fn track_of(&self, lbn: u64) -> Option<TrackExtent> {
        let located = self.locate(lbn)?;
        let mut first_lbn = lbn;
        // Walk back while the previous LBN is on the same track; bounded by one track.
        for _ in 0..located.sectors_per_track {
            let Some(previous) = first_lbn.checked_sub(1).and_then(|previous| self.locate(previous)) else {
                break;
            };
            if previous.cylinder != located.cylinder || previous.surface != located.surface {
                break;
            }
            first_lbn -= 1;
        }
        let last_lbn = lbn + located.lbns_left_on_track - 1;
        Some(TrackExtent {
            cylinder: located.cylinder,
            surface: located.surface,
            first_lbn,
            sector_count: (last_lbn - first_lbn + 1) as u32,
            sectors_per_track: located.sectors_per_track,
        })
    }

    /// Seek time for a distance, including the write settle for writes.
    pub fn seek_ns(&self, distance_cylinders: u32, op: DiskOp) -> Nanos {
        let settle = if op == DiskOp::Write && distance_cylinders > 0 { self.write_settle_ns_exact } else { 0.0 };
        (self.seek.time_ns(distance_cylinders) + settle).round() as Nanos
    }

    /// Head switch time.
    pub fn head_switch_ns(&self) -> Nanos {
        self.head_switch_ns_exact.round() as Nanos
    }

    /// Additional write settling delay.
    pub fn write_settle_ns(&self) -> Nanos {
        self.write_settle_ns_exact.round() as Nanos
    }

    /// Time to move one sector over the host path in `op`'s direction.
    pub(crate) fn bus_sector_ns(&self, op: DiskOp) -> f64 {
        match op {
            DiskOp::Read => self.bus_read_sector_ns,
            DiskOp::Write => self.bus_write_sector_ns,
        }
    }

    /// Seek time for `distance_cylinders`, unrounded, without settle.
    pub(crate) fn seek_time_ns(&self, distance_cylinders: u32) -> f64 {
        match self.seek_ns_by_distance.get(distance_cylinders as usize) {
            Some(&time_ns) => time_ns,
            None => self.seek.time_ns(distance_cylinders),
        }
    }

    pub(crate) fn locate(&self, lbn: u64) -> Option<Located> {
        if lbn >= self.sector_count {
            return None;
        }
        self.layout.locate(lbn)
    }
}

/// Parses, applies overrides and builds.
fn load_from(source: &dyn FileSource, parv: &str, overrides: &[Override]) -> Result<DiskModel, LoadError> {
    let mut document = params::parse_document(source, parv)?;
    let disk_instance = document
        .topology_instances("disksim_disk")
        .into_iter()
        .next()
        .or_else(|| {
            document
                .instantiations
                .iter()
                .flat_map(|i| i.instance_names.iter())
                .find(|name| name.starts_with("disk"))
                .cloned()
        })
        .ok_or_else(|| LoadError::Model {
            file: parv.to_string(),
            message: "no disksim_disk in the topology".to_string(),
        })?;
    apply_overrides(&mut document, &disk_instance, overrides)?;
    let disk = document.instance(&disk_instance).ok_or_else(|| LoadError::Model {
        file: parv.to_string(),
        message: format!("instance `{disk_instance}` is not instantiated from a defined block"),
    })?;
    if disk.type_name != "disksim_disk" {
        return Err(LoadError::Model {
            file: disk.location.file.to_string(),
            message: format!("`{disk_instance}` is a `{}`, only `disksim_disk` is modelled", disk.type_name),
        });
    }
    let path_sector_ns = path_transfer_ns(&document)?;
    build_model(source, disk, path_sector_ns)
}

fn apply_overrides(document: &mut Document, disk_instance: &str, overrides: &[Override]) -> Result<(), LoadError> {
    for item in overrides {
        let text = format!("{}:{}={}", item.component, item.parameter, item.value);
        let definition_name = document
            .instantiations
            .iter()
            .rev()
            .find(|i| i.instance_names.iter().any(|name| name == &item.component))
            .map(|i| i.definition_name.clone())
            .ok_or_else(|| LoadError::BadOverride {
                text: text.clone(),
                message: format!("no instance `{}` (the disk is `{disk_instance}`)", item.component),
            })?;
        let block = document
            .definitions
            .iter_mut()
            .rev()
            .find(|block| block.name.as_deref() == Some(definition_name.as_str()))
            .ok_or_else(|| LoadError::BadOverride {
                text: text.clone(),
                message: "instance has no definition".into(),
            })?;
        let holder = block.holder_of_mut(&item.parameter).ok_or_else(|| LoadError::BadOverride {
            text: text.clone(),
            message: format!("`{}` has no parameter `{}`", item.component, item.parameter),
        })?;
        let location = Location { file: Arc::from("--set"), line: 1 };
        holder.set_scalar(&item.parameter, &item.value, location);
    }
    Ok(())
}

/// Per-sector transfer time over the host path, to the host (reads) and from
/// it (writes): the slowest of the buses' read or write block transfer times
/// and the controllers' bulk sector transfer times (the disk's own is folded
/// in by the caller).
fn path_transfer_ns(document: &Document) -> Result<[f64; 2], LoadError> {
    let mut slowest_ms = [0.0f64; 2];
    for bus in document.topology_instances("disksim_bus") {
        if let Some(block) = document.instance(&bus) {
            slowest_ms[0] = slowest_ms[0].max(block.float_or("Read block transfer time", 0.0)?);
            slowest_ms[1] = slowest_ms[1].max(block.float_or("Write block transfer time", 0.0)?);
        }
    }
    for controller in document.topology_instances("disksim_ctlr") {
        if let Some(block) = document.instance(&controller) {
            let bulk_ms = block.float_or("Bulk sector transfer time", 0.0)?;
            slowest_ms = slowest_ms.map(|slowest| slowest.max(bulk_ms));
        }
    }
    Ok(slowest_ms.map(|slowest| slowest * NANOS_PER_MS))
}

fn unsupported(value: &Value, parameter: &str, message: &str) -> LoadError {
    LoadError::Unsupported {
        file: value.location.file.to_string(),
        line: value.location.line,
        parameter: parameter.to_string(),
        value: match &value.kind {
            ValueKind::Scalar(text) => text.clone(),
            _ => "(block or list)".to_string(),
        },
        message: message.to_string(),
    }
}

fn out_of_range(value: &Value, parameter: &str, message: &str) -> LoadError {
    LoadError::BadValue {
        file: value.location.file.to_string(),
        line: value.location.line,
        parameter: parameter.to_string(),
        message: message.to_string(),
    }
}

/// A non-negative integer that fits `u32`.
fn count_u32(block: &Block, name: &str) -> Result<u32, LoadError> {
    let value = block.require(name)?;
    u32::try_from(value.integer(name)?).map_err(|_| out_of_range(value, name, "must be between 0 and 4294967295"))
}

fn non_negative_ms(block: &Block, name: &str, default: Option<f64>) -> Result<f64, LoadError> {
    let milliseconds = match (block.get(name), default) {
        (None, Some(default)) => default,
        _ => block.float(name)?,
    };
    Ok(milliseconds.max(0.0) * NANOS_PER_MS)
}

fn build_model(source: &dyn FileSource, disk: &Block, path_sector_ns: [f64; 2]) -> Result<DiskModel, LoadError> {
    let model_value = disk.require("Model")?;
    let model_block = model_value.block("Model")?;
    let surface_count = count_u32(model_block, "Number of data surfaces")?;
    let cylinder_count = count_u32(model_block, "Number of cylinders")?;
    let block_count_value = model_block.require("Block count")?;
    let block_count = u64::try_from(block_count_value.integer("Block count")?)
        .map_err(|_| out_of_range(block_count_value, "Block count", "must be non-negative"))?;
    if surface_count == 0 || cylinder_count == 0 || block_count == 0 {
        return Err(LoadError::Model {
            file: model_block.location.file.to_string(),
            message: "surfaces, cylinders and block count must be positive".to_string(),
        });
    }
    let layout_value = model_block.require("Layout Model")?;
    let layout_block = layout_value.block("Layout Model")?;
    let layout = match layout_block.type_name.as_str() {
        "dm_layout_g1" => Layout::G1(build_g1(layout_block, surface_count, cylinder_count)?),
        "dm_layout_g4" => Layout::G4(build_g4(layout_block, block_count, cylinder_count)?),
        other => {
            return Err(unsupported(
                layout_value,
                "Layout Model",
                &format!("layout `{other}`: G1 and G4 are supported"),
            ))
        }
    };
    let sector_count = block_count.min(layout.capacity());
    // A last zone ending on the cylinder count adds that cylinder.
    let physical_cylinder_count = match &layout {
        Layout::G1(g1) => g1.zones.last().map_or(cylinder_count, |zone| cylinder_count.max(zone.last_cylinder + 1)),
        Layout::G4(_) => cylinder_count,
    };
    let mechanics_value = model_block.require("Mechanical Model")?;
    let mechanics = mechanics_value.block("Mechanical Model")?;
    let rpm_value = mechanics.require("Rotation speed (in rpms)")?;
    let rpm = rpm_value.float("Rotation speed (in rpms)")?;
    if !(1.0..=1.0e6).contains(&rpm) {
        return Err(out_of_range(rpm_value, "Rotation speed (in rpms)", "must be between 1 and 1000000"));
    }
    let (seek, constant_access_ns, average_rotation) = build_mechanics(source, mechanics, cylinder_count)?;
    let scheduler_block = disk.require("Scheduler")?.block("Scheduler")?;
    let max_queue_value = disk.require("Max queue length")?;
    let max_queue_length = usize::try_from(max_queue_value.integer("Max queue length")?.max(1))
        .map_err(|_| out_of_range(max_queue_value, "Max queue length", "too large"))?
        .min(1 << 16);
    let disk_sector_ns = disk.float_or("Bulk sector transfer time", 0.0)? * NANOS_PER_MS;
    Ok(DiskModel {
        name: disk.name.clone().unwrap_or_else(|| "disk".to_string()),
        sector_count,
        surface_count,
        cylinder_count: physical_cylinder_count,
        rpm,
        revolution_ns_exact: 60.0e9 / rpm,
        layout,
        seek_ns_by_distance: (0..physical_cylinder_count).map(|distance| seek.time_ns(distance)).collect(),
        seek,
        head_switch_ns_exact: non_negative_ms(mechanics, "Head switch time", None)?,
        write_settle_ns_exact: mechanics.float_or("Add. write settling delay", 0.0)? * NANOS_PER_MS,
        max_queue_length,
        scheduler: scheduler_of(scheduler_block)?,
        overheads: overheads_of(disk)?,
        bus_read_sector_ns: path_sector_ns[0].max(disk_sector_ns),
        bus_write_sector_ns: path_sector_ns[1].max(disk_sector_ns),
        minimum_seek_delay_ns: non_negative_ms(disk, "Minimum seek delay", Some(0.0))?,
        never_disconnect: disk.integer_or("Never disconnect", 0)? != 0,
        hold_bus_for_reads: disk.integer_or("Hold bus entire read xfer", 0)? != 0,
        cache: cache_of(disk)?,
        constant_access_ns,
        average_rotation,
    })
}

fn scheduler_of(block: &Block) -> Result<Scheduler, LoadError> {
    let value = block.require("Scheduling policy")?;
    // DiskSim's policy numbers: 1 FCFS, 4 C-LOOK (CYCLE_LOOK), 8 SPTF (SPTF_OPT),
    // and the other positioning-time families map to SPTF, the look families to C-LOOK.
    match value.integer("Scheduling policy")? {
        1 | 2 => Ok(Scheduler::Fcfs),
        3..=7 => Ok(Scheduler::CLook),
        8..=13 => Ok(Scheduler::Sptf),
        _ => Err(unsupported(value, "Scheduling policy", "use 1 (FCFS), 4 (C-LOOK) or 8 (SPTF)")),
    }
}

fn overheads_of(disk: &Block) -> Result<Overheads, LoadError> {
    let ms = |name: &str| non_negative_ms(disk, name, Some(0.0));
    let pair = |after_read: &str, after_write: &str| -> Result<[f64; 2], LoadError> {
        Ok([ms(after_read)?, ms(after_write)?])
    };
    let scale = disk.float_or("Time scale for overheads", 1.0)?.max(0.0);
    let extra_write_disconnect = if disk.integer_or("Extra write disconnect", 0)? != 0 {
        Some(ExtraWriteDisconnect {
            command_ns: ms("Extradisc command overhead")? * scale,
            disconnect_ns: ms("Extradisc disconnect overhead")? * scale,
            inter_disconnect_ns: ms("Extradisc inter-disconnect delay")? * scale,
            second_disconnect_ns: ms("Extradisc 2nd disconnect overhead")? * scale,
            seek_delta_ns: ms("Extradisc seek delta")? * scale,
        })
    } else {
        None
    };
    let mut overheads = Overheads {
        read_hit_ns: pair("Read hit over. after read", "Read hit over. after write")?,
        read_miss_ns: pair("Read miss over. after read", "Read miss over. after write")?,
        write_hit_ns: pair("Write hit over. after read", "Write hit over. after write")?,
        write_miss_ns: pair("Write miss over. after read", "Write miss over. after write")?,
        read_completion_ns: ms("Read completion overhead")? * scale,
        write_completion_ns: ms("Write completion overhead")? * scale,
        data_preparation_ns: ms("Data preparation overhead")? * scale,
        reselect_first_ns: ms("First reselect overhead")? * scale,
        reselect_other_ns: ms("Other reselect overhead")? * scale,
        read_disconnect_ns: pair("Read disconnect afterread", "Read disconnect afterwrite")?.map(|ns| ns * scale),
        write_disconnect_ns: ms("Write disconnect overhead")? * scale,
        extra_write_disconnect,
    };
    let per_request = ms("Per-request overhead time")?;
    for pair in [
        &mut overheads.read_hit_ns,
        &mut overheads.read_miss_ns,
        &mut overheads.write_hit_ns,
        &mut overheads.write_miss_ns,
    ] {
        for value in pair.iter_mut() {
            *value = (*value + per_request) * scale;
        }
    }
    if let Some(extra) = &mut overheads.extra_write_disconnect {
        extra.command_ns += per_request * scale;
    }
    Ok(overheads)
}

fn cache_of(disk: &Block) -> Result<CacheParams, LoadError> {
    let flag = |name: &str| -> Result<bool, LoadError> { Ok(disk.integer_or(name, 0)? != 0) };
    let small = |name: &str, default: i64| -> Result<u32, LoadError> {
        let value = disk.integer_or(name, default)?;
        u32::try_from(value.max(0)).map_err(|_| match disk.get(name) {
            Some(found) => out_of_range(found, name, "too large"),
            None => LoadError::Model { file: disk.location.file.to_string(), message: format!("`{name}` too large") },
        })
    };
    let continuous_read = small("Buffer continuous read", 0)?;
    if continuous_read > 4 {
        let value = disk.require("Buffer continuous read")?;
        return Err(unsupported(value, "Buffer continuous read", "use 0 to 4"));
    }
    Ok(CacheParams {
        enabled: flag("Enable caching in buffer")?,
        segment_count: small("Number of buffer segments", 1)?.max(1),
        segment_size_sectors: small("Segment size (in blks)", 0)?,
        fast_write_level: small("Fast write level", 0)?,
        continuous_read,
        read_ahead_on_idle_hit: flag("Read-ahead on idle hit")?,
        stop_prefetch_in_sector: flag("Stop prefetch in sector")?,
        immediate_partial_hits: flag("Immed transfer partial hit")?,
        read_ahead_min_sectors: small("Minimum read-ahead (blks)", 0)?,
        read_ahead_max_sectors: small("Maximum read-ahead (blks)", 0)?,
        read_any_free_blocks: flag("Read any free blocks")?,
        immediate_read: flag("Immediate buffer read")?,
        immediate_write: flag("Immediate buffer write")?,
        read_hits_on_write_data: flag("Allow read hits on write data")?,
        separate_write_segment: flag("Use separate write segment")?,
        almost_read_hits: flag("Allow almost read hits")?,
        read_ahead_over_requested: flag("Read-ahead over requested")?,
        high_water_mark: disk.float_or("High (read) water mark", 0.0)?.clamp(0.0, 1.0),
        water_mark_by_request_size: flag("Set watermark by reqsize")?,
    })
}

type Mechanics = (SeekCurve, Option<f64>, bool);

fn build_mechanics(source: &dyn FileSource, mechanics: &Block, cylinder_count: u32) -> Result<Mechanics, LoadError> {
    let access_value = mechanics.require("Access time type")?;
    let access = access_value.scalar("Access time type")?;
    let (constant_access_ns, average_rotation) = match access {
        "trackSwitchPlusRotation" => (None, false),
        "averageRotation" => (None, true),
        "constant" => (Some(non_negative_ms(mechanics, "Constant access time", None)?), false),
        _ => {
            return Err(unsupported(
                access_value,
                "Access time type",
                "use constant, averageRotation or trackSwitchPlusRotation",
            ))
        }
    };
    let seek_value = mechanics.require("Seek type")?;
    let ms = |name: &str| non_negative_ms(mechanics, name, None);
    let seek = match seek_value.scalar("Seek type")? {
        "extracted" => {
            let file_value = mechanics.require("Full seek curve")?;
            let file_name = file_value.scalar("Full seek curve")?;
            let (file, text) = source.read(file_name).map_err(|error| match error {
                LoadError::Io { message, .. } => {
                    out_of_range(file_value, "Full seek curve", &format!("cannot read `{file_name}`: {message}"))
                }
                other => other,
            })?;
            SeekCurve::parse_extracted(&file, &text)?
        }
        "linear" => SeekCurve::Linear {
            single_ns: ms("Single cylinder seek time")?,
            average_ns: ms("Average seek time")?,
            full_ns: ms("Full strobe seek time")?,
            cylinder_count,
        },
        "curve" => {
            let (single, average, full) =
                (ms("Single cylinder seek time")?, ms("Average seek time")?, ms("Full strobe seek time")?);
            let cylinders = f64::from(cylinder_count.max(2));
            SeekCurve::Lee {
                a_ns: (-10.0 * single + 15.0 * average - 5.0 * full) / (3.0 * cylinders.sqrt()),
                b_ns: (7.0 * single - 15.0 * average + 8.0 * full) / (3.0 * cylinders),
                c_ns: single,
            }
        }
        "constant" => SeekCurve::Constant { time_ns: ms("Constant seek time")? },
        kind @ ("hpl" | "hplplus10") => hpl_curve(mechanics, kind == "hplplus10")?,
        _ => {
            return Err(unsupported(
                seek_value,
                "Seek type",
                "use extracted, linear, curve, constant, hpl or hplplus10",
            ))
        }
    };
    Ok((seek, constant_access_ns, average_rotation))
}

fn float_list(block: &Block, name: &str, expected: usize) -> Result<Vec<f64>, LoadError> {
    let value = block.require(name)?;
    let items = value.list(name)?;
    if items.len() != expected {
        return Err(out_of_range(value, name, &format!("expected {expected} numbers, found {}", items.len())));
    }
    items.iter().map(|item| item.float(name)).collect()
}

fn hpl_curve(mechanics: &Block, first_ten: bool) -> Result<SeekCurve, LoadError> {
    let values = float_list(mechanics, "HPL seek equation values", 6)?;
    let first_ten_ns = if first_ten {
        let times = float_list(mechanics, "First ten seek times", 10)?;
        let mut table = [0.0; 10];
        for (slot, time) in table.iter_mut().zip(times) {
            *slot = time.max(0.0) * NANOS_PER_MS;
        }
        Some(table)
    } else {
        None
    };
    Ok(SeekCurve::Hpl {
        boundary_cylinders: values[0].max(0.0),
        short_ns: (values[1].max(0.0) * NANOS_PER_MS, values[2].max(0.0) * NANOS_PER_MS),
        long_ns: (values[3].max(0.0) * NANOS_PER_MS, values[4].max(0.0) * NANOS_PER_MS),
        single_ns: (values[5] >= 0.0).then(|| values[5] * NANOS_PER_MS),
        first_ten_ns,
    })
}

fn build_g1(layout: &Block, surface_count: u32, cylinder_count: u32) -> Result<G1Layout, LoadError> {
    let mapping_value = layout.require("LBN-to-PBN mapping scheme")?;
    let mapping = match mapping_value.integer("LBN-to-PBN mapping scheme")? {
        0 => MappingScheme::Traditional,
        1 => MappingScheme::SerpentinePerZone,
        2 => MappingScheme::SerpentineByParity,
        _ => return Err(unsupported(mapping_value, "LBN-to-PBN mapping scheme", "use 0, 1 or 2")),
    };
    let sparing_value = layout.require("Sparing scheme used")?;
    let range_size = u32::try_from(layout.integer_or("Rangesize for sparing", 1)?.max(1)).unwrap_or(u32::MAX);
    let periodic =
        |period_kind, at_front, slips_use_spares| Sparing::Periodic { period_kind, at_front, slips_use_spares };
    let sparing = match sparing_value.integer("Sparing scheme used")? {
        0 | 7 => Sparing::None,
        1 => Sparing::TracksAtZoneEnd,
        2 => periodic(Period::Cylinder, false, true),
        3 => periodic(Period::Track, false, true),
        4 => periodic(Period::Cylinder, false, false),
        5 => periodic(Period::Cylinder, true, true),
        6 => periodic(Period::Cylinder, true, false),
        8 => periodic(Period::CylinderRange(range_size), false, true),
        9 => periodic(Period::Zone, false, true),
        10 => periodic(Period::Zone, false, false),
        _ => return Err(unsupported(sparing_value, "Sparing scheme used", "use 0 to 10")),
    };
    let skew_in_revolutions = |block: &Block| -> Result<bool, LoadError> {
        Ok(block
            .get("Skew units")
            .map(|value| value.scalar("Skew units"))
            .transpose()?
            .is_some_and(|units| units.to_ascii_lowercase().starts_with("rev")))
    };
    let layout_revolutions = skew_in_revolutions(layout)?;
    let zones_value = layout.require("Zones")?;
    let mut zones = Vec::new();
    let mut next_cylinder = 0u32;
    for item in zones_value.list("Zones")? {
        let zone = item.block("Zones")?;
        let first_cylinder = count_u32(zone, "First cylinder number")?;
        let last_cylinder = count_u32(zone, "Last cylinder number")?;
        let spt = count_u32(zone, "Blocks per track")?;
        if first_cylinder < next_cylinder {
            let value = zone.require("First cylinder number")?;
            let message =
                format!("zones must ascend without overlapping: this zone starts before cylinder {next_cylinder}");
            return Err(out_of_range(value, "First cylinder number", &message));
        }
        // DiskSim 4.0 runs models whose last zone ends on the cylinder count
        // itself, so that one is accepted (the drive then has that cylinder too).
        if last_cylinder < first_cylinder || last_cylinder > cylinder_count {
            let value = zone.require("Last cylinder number")?;
            let message = format!(
                "must lie between the zone's first cylinder {first_cylinder} and the cylinder count {cylinder_count}"
            );
            return Err(out_of_range(value, "Last cylinder number", &message));
        }
        if spt == 0 {
            return Err(out_of_range(zone.require("Blocks per track")?, "Blocks per track", "must be at least 1"));
        }
        next_cylinder = last_cylinder + 1;
        let revolutions = match zone.get("Skew units") {
            Some(_) => skew_in_revolutions(zone)?,
            None => layout_revolutions,
        };
        let unit = if revolutions { f64::from(spt) } else { 1.0 };
        let spare_count = u64::try_from(zone.integer("Number of spares")?.max(0)).unwrap_or(0);
        let slips = zone
            .get("slips")
            .map(|value| value.list("slips").map(|items| items.to_vec()))
            .transpose()?
            .unwrap_or_default()
            .iter()
            .map(|item| item.integer("slips").map(|position| (position.max(0) as u64, 1)))
            .collect::<Result<Vec<_>, _>>()?;
        let defects = defect_pairs(zone)?;
        let g1_zone = G1Zone {
            first_cylinder,
            last_cylinder,
            sectors_per_track: spt,
            first_block_offset_sectors: zone.float_or("Offset of first block", 0.0)? * unit,
            empty_front_sectors: u64::try_from(zone.integer_or("Empty space at zone front", 0)?.max(0)).unwrap_or(0),
            track_skew_sectors: zone.float_or("Skew for track switch", 0.0)? * unit,
            cylinder_skew_sectors: zone.float_or("Skew for cylinder switch", 0.0)? * unit,
            spare_count,
            slips: SlipTable::new(slips),
            slipped_tracks: SlipTable::default(),
            period_slips: Vec::new(),
            defects: DefectTable::new(defects),
            first_lbn: 0,
            lbn_count: 0,
        };
        let period_sectors = match sparing {
            Sparing::Periodic { period_kind: Period::Track, .. } => u64::from(spt),
            Sparing::Periodic { period_kind: Period::Cylinder, .. } => u64::from(spt) * u64::from(surface_count),
            Sparing::Periodic { period_kind: Period::CylinderRange(range), .. } => {
                u64::from(spt) * u64::from(surface_count) * u64::from(range)
            }
            _ => u64::MAX,
        };
        if spare_count >= period_sectors {
            let value = zone.require("Number of spares")?;
            return Err(out_of_range(value, "Number of spares", "spares fill the whole sparing period"));
        }
        zones.push(g1_zone);
    }
    if zones.is_empty() {
        return Err(out_of_range(zones_value, "Zones", "at least one zone is required"));
    }
    let zone_items = zones_value.list("Zones")?;
    let layout = G1Layout::new(surface_count, mapping, sparing, zones);
    if let Some((index, defective, replacement)) = layout.unusable_replacement() {
        let zone = zone_items[index].block("Zones")?;
        let value = zone.require("defects")?;
        return Err(out_of_range(
            value,
            "defects",
            &format!("defect {defective} is remapped to {replacement}, which lies outside the zone or holds data"),
        ));
    }
    if let Some((index, slips, spares)) = layout.overfull_period() {
        let zone = zone_items[index].block("Zones")?;
        let value = zone.require("slips")?;
        return Err(out_of_range(
            value,
            "slips",
            &format!("{slips} slips fall in one sparing period, which has only {spares} spares to take them"),
        ));
    }
    Ok(layout)
}

/// A zone's `defects` list: pairs of (defective, replacement) locations.
fn defect_pairs(zone: &Block) -> Result<Vec<(u64, u64)>, LoadError> {
    let Some(value) = zone.get("defects") else {
        return Ok(Vec::new());
    };
    let items = value.list("defects")?;
    if items.len() % 2 != 0 {
        return Err(out_of_range(value, "defects", "expected pairs `defective, replacement`"));
    }
    let mut pairs = Vec::new();
    let mut defective_seen = std::collections::HashSet::new();
    let mut replacement_seen = std::collections::HashSet::new();
    for pair in items.chunks(2) {
        let location = |item: &Value| -> Result<u64, LoadError> {
            u64::try_from(item.integer("defects")?).map_err(|_| out_of_range(item, "defects", "must be non-negative"))
        };
        let (defective, replacement) = (location(&pair[0])?, location(&pair[1])?);
        if defective != replacement && (!defective_seen.insert(defective) || !replacement_seen.insert(replacement)) {
            return Err(out_of_range(
                &pair[0],
                "defects",
                &format!("location {defective} or {replacement} appears in two remappings"),
            ));
        }
        pairs.push((defective, replacement));
    }
    Ok(pairs)
}

fn build_g4(layout: &Block, block_count: u64, cylinder_count: u32) -> Result<G4Layout, LoadError> {
    let patterns_value = layout.require("TP")?;
    let numbers = patterns_value.list("TP")?;
    if numbers.len() % 3 != 0 || numbers.is_empty() {
        return Err(out_of_range(patterns_value, "TP", "expected triples `first, last, sectors per track`"));
    }
    let mut patterns = Vec::new();
    for triple in numbers.chunks(3) {
        let field = |index: usize| -> Result<u32, LoadError> {
            u32::try_from(triple[index].integer("TP")?).map_err(|_| out_of_range(&triple[index], "TP", "out of range"))
        };
        let pattern = TrackPattern { first_sector: field(0)?, last_sector: field(1)?, sectors_per_track: field(2)? };
        if pattern.sectors_per_track == 0
            || pattern.last_sector < pattern.first_sector
            || pattern.last_sector >= pattern.sectors_per_track
        {
            return Err(out_of_range(&triple[0], "TP", "a pattern needs first <= last < sectors per track"));
        }
        patterns.push(pattern);
    }
    let index_value = layout.require("IDX")?;
    let mut nodes = Vec::new();
    for node_value in index_value.list("IDX")? {
        nodes.push(g4_node(node_value)?);
    }
    if nodes.is_empty() {
        return Err(out_of_range(index_value, "IDX", "at least one index node is required"));
    }
    check_g4_references(&nodes, patterns.len(), index_value, cylinder_count)?;
    let slips_value = layout.require("Slips")?;
    let slip_items = slips_value.list("Slips")?;
    if slip_items.len() % 2 != 0 {
        return Err(out_of_range(slips_value, "Slips", "expected pairs `lbn, count`"));
    }
    let mut slips = Vec::new();
    for pair in slip_items.chunks(2) {
        let start =
            u64::try_from(pair[0].integer("Slips")?).map_err(|_| out_of_range(&pair[0], "Slips", "negative"))?;
        let length =
            u64::try_from(pair[1].integer("Slips")?).map_err(|_| out_of_range(&pair[1], "Slips", "negative"))?;
        slips.push((start, length));
    }
    let root = nodes.len() - 1;
    let slips = SlipTable::new(slips);
    let described = nodes[root].iter().map(|entry| entry.lbn + entry.run_lbns).max().unwrap_or(0);
    let lbn_count = block_count.min(described.saturating_sub(slips.total()));
    let mut g4 = G4Layout { patterns, nodes, root, slips, remaps: Vec::new(), lbn_count };
    g4.remaps = g4_remaps(layout.require("Remaps")?, &g4, cylinder_count)?;
    Ok(g4)
}

/// The `Remaps` list: sextuples `lbn, length, cylinder, head, sector, sectors
/// per track`. Each run must lie within the exported LBNs and on one track,
/// runs must not overlap, and their sectors must hold no other LBN.
fn g4_remaps(value: &Value, table: &G4Layout, cylinder_count: u32) -> Result<Vec<G4Remap>, LoadError> {
    let items = value.list("Remaps")?;
    if items.len() % 6 != 0 {
        return Err(out_of_range(value, "Remaps", "expected sextuples `lbn, length, cylinder, head, sector, spt`"));
    }
    let mut remaps = Vec::new();
    for fields in items.chunks(6) {
        let mut numbers = [0u64; 6];
        for (slot, item) in numbers.iter_mut().zip(fields) {
            *slot = u64::try_from(item.integer("Remaps")?)
                .map_err(|_| out_of_range(item, "Remaps", "must be non-negative"))?;
        }
        let [lbn, length, cylinder, surface, sector, spt] = numbers;
        let fits = length >= 1
            && spt >= 1
            && spt <= u64::from(u32::MAX)
            && sector + length <= spt
            && cylinder < u64::from(cylinder_count)
            && surface <= u64::from(u32::MAX)
            && lbn.checked_add(length).is_some_and(|end| end <= table.lbn_count);
        if !fits {
            return Err(out_of_range(
                &fields[0],
                "Remaps",
                "a remap needs 1 or more LBNs within the disk, on sectors within one track of a cylinder on the disk",
            ));
        }
        remaps.push(G4Remap {
            lbn,
            length,
            cylinder: cylinder as u32,
            surface: surface as u32,
            sector: sector as u32,
            sectors_per_track: spt as u32,
        });
    }
    remaps.sort_unstable_by_key(|remap| remap.lbn);
    if remaps.windows(2).any(|pair| pair[0].lbn + pair[0].length > pair[1].lbn) {
        return Err(out_of_range(value, "Remaps", "remapped runs overlap"));
    }
    for remap in &remaps {
        for offset in 0..remap.length as u32 {
            let destination =
                PhysicalSector { cylinder: remap.cylinder, surface: remap.surface, sector: remap.sector + offset };
            if let Some(occupant) = table.table_lbn_at(destination) {
                return Err(out_of_range(
                    value,
                    "Remaps",
                    &format!("LBN {} is remapped onto {destination:?}, which holds LBN {occupant}", remap.lbn),
                ));
            }
        }
    }
    Ok(remaps)
}

fn g4_node(node_value: &Value) -> Result<Vec<G4Entry>, LoadError> {
    let items = node_value.list("IDX")?;
    let mut entries = Vec::new();
    let mut position = 0;
    while position < items.len() {
        let remaining = &items[position..];
        if remaining.len() < 10 {
            return Err(out_of_range(&remaining[0], "IDX", "an index entry needs 10 fields (11 for a TRACK child)"));
        }
        let integer = |index: usize| remaining[index].integer("IDX");
        let unsigned = |index: usize| -> Result<u64, LoadError> {
            u64::try_from(integer(index)?).map_err(|_| out_of_range(&remaining[index], "IDX", "must be non-negative"))
        };
        let child_index =
            usize::try_from(integer(9)?).map_err(|_| out_of_range(&remaining[9], "IDX", "negative child"))?;
        let (child, surface, width) = match remaining[8].scalar("IDX")? {
            "TRACK" => {
                let surface_field = remaining
                    .get(10)
                    .ok_or_else(|| out_of_range(&remaining[0], "IDX", "a TRACK entry needs a surface"))?;
                let surface = u32::try_from(surface_field.integer("IDX")?)
                    .map_err(|_| out_of_range(surface_field, "IDX", "bad surface"))?;
                (G4Child::Track(child_index), surface, 11)
            }
            "IDX" => (G4Child::Index(child_index), 0, 10),
            _ => return Err(unsupported(&remaining[8], "IDX", "child type must be IDX or TRACK")),
        };
        let entry = G4Entry {
            lbn: unsigned(0)?,
            cylinder: integer(1)?,
            angle: remaining[2].float("IDX")?,
            instance_lbns: unsigned(3)?,
            instance_cylinders: integer(4)?,
            skew: remaining[5].float("IDX")?,
            run_lbns: unsigned(6)?,
            run_cylinders: integer(7)?,
            child,
            surface,
        };
        if entry.instance_lbns == 0
            || entry.run_lbns.checked_rem(entry.instance_lbns) != Some(0)
            || entry.cylinder.abs() > 1 << 40
            || entry.instance_cylinders.abs() > 1 << 40
        {
            return Err(out_of_range(
                &remaining[0],
                "IDX",
                "an entry's run must be a positive whole number of instances",
            ));
        }
        if entries.last().is_some_and(|previous: &G4Entry| previous.lbn > entry.lbn) {
            return Err(out_of_range(&remaining[0], "IDX", "entries must be in ascending LBN order"));
        }
        entries.push(entry);
        position += width;
    }
    Ok(entries)
}

/// Children must exist and point only to earlier nodes (the root is last), so
/// walks down the tree terminate.
fn check_g4_references(
    nodes: &[Vec<G4Entry>],
    pattern_count: usize,
    value: &Value,
    cylinder_count: u32,
) -> Result<(), LoadError> {
    for (node_index, entries) in nodes.iter().enumerate() {
        for entry in entries {
            let ok = match entry.child {
                G4Child::Index(child) => child < node_index,
                G4Child::Track(pattern) => pattern < pattern_count,
            };
            if !ok {
                return Err(out_of_range(
                    value,
                    "IDX",
                    &format!("node {node_index} refers to a missing or later child (index children must precede their parent)"),
                ));
            }
            if entry.cylinder >= i64::from(cylinder_count) && node_index == nodes.len() - 1 {
                return Err(out_of_range(
                    value,
                    "IDX",
                    &format!("root entry at cylinder {} beyond the disk", entry.cylinder),
                ));
            }
        }
    }
    Ok(())
}

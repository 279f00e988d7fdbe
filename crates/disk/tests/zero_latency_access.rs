//! Zero-latency access (`Immediate buffer read` / `Immediate buffer write`) and
//! `Read any free blocks` on a real drive model: a whole-track access with the
//! heads already on the track takes one revolution wherever the platter stands,
//! where an ordinary access waits for the first sector and then reads the whole
//! track; and sectors passing under the head before the requested ones are kept
//! in the cache only when the drive reads free blocks.

use std::sync::Arc;

use proxima_disk::{DiskModel, DiskOp, DiskRequest, HardDisk, Nanos, Override};

const LANDINGS: u64 = 200;

fn model_with(name: &str, overrides: &[&str]) -> Arc<DiskModel> {
    let overrides: Vec<Override> = overrides.iter().map(|text| Override::parse(text).unwrap()).collect();
    Arc::new(DiskModel::builtin_with(name, &overrides).unwrap())
}

/// Runs one request at `now_ns` on an otherwise idle drive; returns its response time.
fn respond(disk: &mut HardDisk, now_ns: Nanos, request: DiskRequest) -> Nanos {
    disk.arrive(now_ns, request);
    let mut completions = Vec::new();
    let completion_ns = disk.next_event_ns().unwrap();
    disk.advance(completion_ns, &mut completions);
    completions.pop().unwrap().response_ns()
}

/// Response times of a whole-track access issued at `LANDINGS` instants spread
/// over one revolution, the heads placed on the track beforehand each time.
fn whole_track_responses(model: &Arc<DiskModel>, op: DiskOp) -> Vec<Nanos> {
    let track = model.track_of(40_000_000).unwrap();
    let mut disk = HardDisk::new(Arc::clone(model), 9);
    let revolution_ns = model.revolution_ns();
    let request = DiskRequest { id: 0, op, lbn: track.first_lbn, sector_count: track.sector_count };
    let mut responses = Vec::new();
    let mut now_ns = 0;
    // One more than measured: the first pays the overhead of following a
    // command of the other kind.
    for landing in 0..=LANDINGS {
        // Far enough apart for the drive to be idle, and stepping the landing angle.
        now_ns += 10 * revolution_ns + revolution_ns * 37 / LANDINGS + landing;
        disk.move_heads_to(now_ns, track.first_lbn);
        responses.push(respond(&mut disk, now_ns, request));
    }
    responses.split_off(1)
}

fn spread(responses: &[Nanos]) -> (Nanos, Nanos, f64) {
    let minimum = *responses.iter().min().unwrap();
    let maximum = *responses.iter().max().unwrap();
    (minimum, maximum, responses.iter().sum::<Nanos>() as f64 / responses.len() as f64)
}

#[test]
fn a_whole_track_read_takes_one_revolution_wherever_it_lands() {
    let immediate = model_with("cheetah15k5", &["disk0:Enable caching in buffer=0", "disk0:Immediate buffer read=1"]);
    let ordinary = model_with("cheetah15k5", &["disk0:Enable caching in buffer=0", "disk0:Immediate buffer read=0"]);
    let track = immediate.track_of(40_000_000).unwrap();
    let revolution_ns = immediate.revolution_ns();
    let sector_ns = revolution_ns / u64::from(track.sectors_per_track) + 1;
    let (zero_min, zero_max, zero_mean) = spread(&whole_track_responses(&immediate, DiskOp::Read));
    let (plain_min, plain_max, plain_mean) = spread(&whole_track_responses(&ordinary, DiskOp::Read));
    // Zero latency: every landing costs the same revolution, give or take the
    // part of a sector the head landed in.
    assert!(zero_max - zero_min <= 2 * sector_ns, "zero latency spread {zero_min}..{zero_max} ns");
    // Ordinary: from one revolution (landing on the first sector) to two.
    assert!(plain_max - plain_min >= revolution_ns * 9 / 10, "ordinary spread {plain_min}..{plain_max} ns");
    assert!(zero_max <= plain_min + 2 * sector_ns, "zero latency never waits for the first sector");
    assert!(plain_mean - zero_mean >= 0.4 * revolution_ns as f64, "means {zero_mean} vs {plain_mean} ns");
}

#[test]
fn a_whole_track_write_through_takes_one_revolution_wherever_it_lands() {
    let immediate = model_with(
        "cheetah15k5",
        &["disk0:Enable caching in buffer=0", "disk0:Fast write level=0", "disk0:Immediate buffer write=1"],
    );
    let ordinary = model_with(
        "cheetah15k5",
        &["disk0:Enable caching in buffer=0", "disk0:Fast write level=0", "disk0:Immediate buffer write=0"],
    );
    let track = immediate.track_of(40_000_000).unwrap();
    let revolution_ns = immediate.revolution_ns();
    let sector_ns = revolution_ns / u64::from(track.sectors_per_track) + 1;
    let (zero_min, zero_max, zero_mean) = spread(&whole_track_responses(&immediate, DiskOp::Write));
    let (_, _, plain_mean) = spread(&whole_track_responses(&ordinary, DiskOp::Write));
    assert!(zero_max - zero_min <= 2 * sector_ns, "zero latency spread {zero_min}..{zero_max} ns");
    assert!(plain_mean - zero_mean >= 0.4 * revolution_ns as f64, "means {zero_mean} vs {plain_mean} ns");
}

/// Reads 8 sectors in the middle of a track, then the 8 just before them;
/// returns how many of the second reads took less than a quarter revolution
/// (cache hits: a miss there waits most of a revolution for its sectors).
fn quick_rereads_of_preceding_sectors(model: &Arc<DiskModel>) -> u64 {
    let revolution_ns = model.revolution_ns();
    let mut disk = HardDisk::new(Arc::clone(model), 4);
    let mut quick = 0;
    let mut now_ns = 0;
    for landing in 0..LANDINGS {
        // A new track each time, so that nothing is cached from before.
        let track = model.track_of(1_000_000 + landing * 37_000).unwrap();
        let middle = track.first_lbn + u64::from(track.sector_count) / 2;
        now_ns += 10 * revolution_ns + revolution_ns * 37 / LANDINGS + landing;
        disk.move_heads_to(now_ns, middle);
        let first = respond(&mut disk, now_ns, DiskRequest { id: 0, op: DiskOp::Read, lbn: middle, sector_count: 8 });
        now_ns += first;
        let again =
            respond(&mut disk, now_ns, DiskRequest { id: 1, op: DiskOp::Read, lbn: middle - 8, sector_count: 8 });
        now_ns += again;
        quick += u64::from(again < revolution_ns / 4);
    }
    quick
}

#[test]
fn free_blocks_passing_before_the_request_are_cached_only_when_enabled() {
    let reading = model_with("atlas10k", &["disk0:Read any free blocks=1"]);
    let skipping = model_with("atlas10k", &["disk0:Read any free blocks=0"]);
    let with_free_blocks = quick_rereads_of_preceding_sectors(&reading);
    let without = quick_rereads_of_preceding_sectors(&skipping);
    assert_eq!(without, 0, "without free blocks the preceding sectors are never cached");
    // They pass under the head unless it lands among them (landing inside the
    // request, zero latency sweeps the whole track): nearly always.
    assert!(with_free_blocks >= LANDINGS * 9 / 10, "{with_free_blocks} of {LANDINGS} re-reads hit");
}

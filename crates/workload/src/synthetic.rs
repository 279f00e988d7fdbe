//! Seeded synthetic workloads: which blocks a workload touches, in what order,
//! reading or writing.
//!
//! A [`SyntheticWorkload`] is an endless iterator of [`BlockRequest`]s over an
//! address space of `block_count` blocks, drawn from a ChaCha8 stream of its
//! seed (same seed, same requests, on every machine). Patterns:
//!
//! - [`Pattern::Uniform`]: every block equally likely.
//! - [`Pattern::HotCold`]: a fraction `hot_block_fraction` of the blocks takes
//!   a fraction `hot_access_fraction` of the accesses (uniform within each set).
//! - [`Pattern::SelfSimilar`]: Knuth's 80/20 family (TAOCP vol. 3, 6.1): the
//!   fraction `h` of the hottest blocks takes the fraction `w = h^θ` of the
//!   accesses, at every scale; [`Pattern::eighty_twenty`] builds θ from a rule
//!   such as "80 % of accesses to 20 % of blocks" (θ = ln 0.8 / ln 0.2).
//! - [`Pattern::Zipf`]: the block of rank `r` has weight `1 / r^exponent`.
//! - [`Pattern::Sequential`]: ascending requests from block 0, wrapping.
//! - [`Pattern::InterleavedAppenders`]: `stream_count` files, each its own
//!   region of the space, appended to in chunks round-robin (the "intrafile"
//!   aging workload); always writes.
//! - [`Pattern::TpcB`]: TPC-B-like: read a uniformly random page, then write
//!   it back; pages of `request_blocks` blocks.
//!
//! In the skewed patterns the hottest blocks are the lowest numbered unless
//! `scatter` is set, which spreads them with a fixed bijection of the space.
//!
//! The SRARW workload of the proximal I/O paper (fill, random updates, serial
//! reads) is in [`crate::srarw`]; it draws its streams from [`seeded_stream`].
//!
//! [`open_loop`] gives a workload Poisson arrival times, to write it as a trace.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, Zipf};

use crate::request::{Operation, TraceRequest};

/// One request of a synthetic workload, in blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRequest {
    /// Read or write.
    pub operation: Operation,
    /// First block.
    pub block: u64,
    /// Blocks addressed (at least 1).
    pub block_count: u64,
}

/// Which blocks a workload touches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pattern {
    /// Every block equally likely.
    Uniform,
    /// `hot_block_fraction` of the blocks take `hot_access_fraction` of the accesses.
    HotCold {
        /// Fraction of the blocks that are hot, in (0, 1).
        hot_block_fraction: f64,
        /// Fraction of the accesses that go to them, in [0, 1].
        hot_access_fraction: f64,
    },
    /// Knuth's self-similar family: `P(block < h·N) = h^θ`.
    SelfSimilar {
        /// θ in (0, 1]: 1 is uniform, smaller is more skewed.
        theta: f64,
    },
    /// Zipf: the block of rank `r` (1-based) has weight `1 / r^exponent`.
    Zipf {
        /// The exponent, positive.
        exponent: f64,
    },
    /// Ascending requests from block 0, wrapping at the end.
    Sequential,
    /// `stream_count` appenders, each in its own region, round-robin.
    InterleavedAppenders {
        /// Files appended to at once.
        stream_count: u64,
    },
    /// Read a random page, then write it back.
    TpcB,
}

impl Pattern {
    /// Knuth's family from a rule: `access_fraction` of the accesses go to
    /// `block_fraction` of the blocks (0.8 and 0.2 for 80/20).
    pub fn eighty_twenty(access_fraction: f64, block_fraction: f64) -> Pattern {
        assert!(
            (0.0..1.0).contains(&block_fraction)
                && block_fraction > 0.0
                && (0.0..1.0).contains(&access_fraction)
                && access_fraction > 0.0,
            "fractions lie in (0, 1)"
        );
        Pattern::SelfSimilar { theta: access_fraction.ln() / block_fraction.ln() }
    }
}

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SyntheticSpec {
    /// The pattern.
    pub pattern: Pattern,
    /// Blocks in the address space.
    pub block_count: u64,
    /// Blocks per request (the page size of TPC-B, the chunk of appenders).
    pub request_blocks: u64,
    /// Fraction of requests that read (ignored by appenders and TPC-B).
    pub read_fraction: f64,
    /// Spread the hottest blocks over the space instead of the lowest numbers.
    pub scatter: bool,
    /// The seed.
    pub seed: u64,
}

/// The generator of a [`SyntheticSpec`].
#[derive(Debug, Clone)]
pub struct SyntheticWorkload {
    spec: SyntheticSpec,
    rng: ChaCha8Rng,
    /// Requests' slots: the space divided into `request_blocks` units.
    slot_count: u64,
    zipf: Option<Zipf<f64>>,
    scatter: Option<AffineBijection>,
    /// Sequential: the next slot; appenders: each stream's next slot.
    cursors: Vec<u64>,
    next_stream: usize,
    /// TPC-B: the page read last, to be written back next.
    write_back: Option<u64>,
}

impl SyntheticWorkload {
    /// A generator; validates the spec.
    ///
    /// # Panics
    /// On a spec that makes no sense (no room for one request, fractions out
    /// of range, no streams): these are programming errors of the caller.
    pub fn new(spec: SyntheticSpec) -> SyntheticWorkload {
        assert!(spec.request_blocks > 0 && spec.block_count >= spec.request_blocks, "room for one request");
        assert!((0.0..=1.0).contains(&spec.read_fraction), "read fraction in [0, 1]");
        let slot_count = spec.block_count / spec.request_blocks;
        let zipf = match spec.pattern {
            Pattern::Zipf { exponent } => Some(Zipf::new(slot_count, exponent).expect("a positive exponent")),
            _ => None,
        };
        let cursors = match spec.pattern {
            Pattern::InterleavedAppenders { stream_count } => {
                assert!(stream_count > 0 && stream_count <= slot_count, "one slot per stream at least");
                vec![0; stream_count as usize]
            }
            _ => vec![0],
        };
        check_pattern(spec.pattern);
        SyntheticWorkload {
            spec,
            rng: ChaCha8Rng::seed_from_u64(spec.seed),
            slot_count,
            zipf,
            scatter: spec.scatter.then(|| AffineBijection::new(slot_count)),
            cursors,
            next_stream: 0,
            write_back: None,
        }
    }

    /// The spec.
    pub fn spec(&self) -> &SyntheticSpec {
        &self.spec
    }

    fn operation(&mut self) -> Operation {
        if self.rng.gen_bool(self.spec.read_fraction) {
            Operation::Read
        } else {
            Operation::Write
        }
    }

    /// A slot of a skewed pattern (hottest first), before scattering.
    fn ranked_slot(&mut self) -> u64 {
        let slots = self.slot_count;
        match self.spec.pattern {
            Pattern::Uniform | Pattern::TpcB => self.rng.gen_range(0..slots),
            Pattern::HotCold { hot_block_fraction, hot_access_fraction } => {
                let hot_slots = ((slots as f64 * hot_block_fraction) as u64).clamp(1, slots - 1);
                if self.rng.gen_bool(hot_access_fraction) {
                    self.rng.gen_range(0..hot_slots)
                } else {
                    self.rng.gen_range(hot_slots..slots)
                }
            }
            Pattern::SelfSimilar { theta } => {
                let uniform: f64 = self.rng.gen();
                ((slots as f64 * uniform.powf(1.0 / theta)) as u64).min(slots - 1)
            }
            Pattern::Zipf { .. } => {
                let rank = self.zipf.expect("built with the pattern").sample(&mut self.rng) as u64;
                rank.clamp(1, slots) - 1
            }
            Pattern::Sequential | Pattern::InterleavedAppenders { .. } => unreachable!("not a ranked pattern"),
        }
    }

    fn placed(&self, slot: u64) -> u64 {
        self.scatter.as_ref().map_or(slot, |bijection| bijection.map(slot))
    }

    fn sequential_slot(&mut self) -> u64 {
        let slot = self.cursors[0];
        self.cursors[0] = (slot + 1) % self.slot_count;
        slot
    }

    fn appender_slot(&mut self) -> u64 {
        let streams = self.cursors.len() as u64;
        let region_slots = self.slot_count / streams;
        let stream = self.next_stream;
        self.next_stream = (stream + 1) % self.cursors.len();
        let offset = self.cursors[stream];
        self.cursors[stream] = (offset + 1) % region_slots;
        stream as u64 * region_slots + offset
    }

    fn request(&self, operation: Operation, slot: u64) -> BlockRequest {
        BlockRequest { operation, block: slot * self.spec.request_blocks, block_count: self.spec.request_blocks }
    }
}

fn check_pattern(pattern: Pattern) {
    match pattern {
        Pattern::HotCold { hot_block_fraction, hot_access_fraction } => assert!(
            hot_block_fraction > 0.0 && hot_block_fraction < 1.0 && (0.0..=1.0).contains(&hot_access_fraction),
            "hot/cold fractions out of range"
        ),
        Pattern::SelfSimilar { theta } => assert!(theta > 0.0 && theta <= 1.0, "θ in (0, 1]"),
        Pattern::Zipf { exponent } => assert!(exponent > 0.0, "a positive Zipf exponent"),
        _ => {}
    }
}

impl Iterator for SyntheticWorkload {
    type Item = BlockRequest;

    fn next(&mut self) -> Option<BlockRequest> {
        let request = match self.spec.pattern {
            Pattern::Sequential => {
                let operation = self.operation();
                let slot = self.sequential_slot();
                self.request(operation, slot)
            }
            Pattern::InterleavedAppenders { .. } => {
                let slot = self.appender_slot();
                self.request(Operation::Write, slot)
            }
            Pattern::TpcB => match self.write_back.take() {
                Some(slot) => self.request(Operation::Write, slot),
                None => {
                    let slot = self.rng.gen_range(0..self.slot_count);
                    self.write_back = Some(slot);
                    self.request(Operation::Read, slot)
                }
            },
            _ => {
                let operation = self.operation();
                let ranked = self.ranked_slot();
                let slot = self.placed(ranked);
                self.request(operation, slot)
            }
        };
        Some(request)
    }
}

/// `slot ↦ (multiplier · slot + offset) mod n` with `multiplier` coprime to
/// `n`: a bijection of `0..n` that scatters neighbours far apart.
#[derive(Debug, Clone, Copy)]
struct AffineBijection {
    n: u64,
    multiplier: u64,
    offset: u64,
}

impl AffineBijection {
    fn new(n: u64) -> AffineBijection {
        let mut multiplier = (0x9E37_79B9_7F4A_7C15_u64 % n).max(1);
        while gcd(multiplier, n) != 1 {
            multiplier = multiplier % n + 1;
        }
        AffineBijection { n, multiplier, offset: n / 3 }
    }

    fn map(&self, slot: u64) -> u64 {
        ((u128::from(slot) * u128::from(self.multiplier) + u128::from(self.offset)) % u128::from(self.n)) as u64
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Independent random streams of one seed: stream `purpose` of the ChaCha8
/// generator seeded with `seed`.
pub fn seeded_stream(seed: u64, purpose: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(purpose);
    rng
}

/// Gives `workload` Poisson arrivals at `requests_per_second` (exponential
/// gaps from its own stream of `seed`), as trace requests on device 0 with
/// `block_bytes`-byte blocks, the first at time 0.
pub fn open_loop(
    workload: SyntheticWorkload,
    requests_per_second: f64,
    block_bytes: u64,
    seed: u64,
) -> impl Iterator<Item = TraceRequest> {
    assert!(requests_per_second > 0.0, "a positive arrival rate");
    let gaps = Exp::new(requests_per_second).expect("a positive rate");
    let mut rng = seeded_stream(seed, 7);
    let mut clock_seconds = 0.0_f64;
    workload.enumerate().map(move |(index, request)| {
        if index > 0 {
            clock_seconds += gaps.sample(&mut rng);
        }
        TraceRequest {
            line_number: index as u64 + 1,
            issue_ns: (clock_seconds * 1e9).round() as u64,
            device: 0,
            operation: request.operation,
            offset_bytes: request.block * block_bytes,
            length_bytes: request.block_count * block_bytes,
            response_ns: None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(pattern: Pattern) -> SyntheticSpec {
        SyntheticSpec { pattern, block_count: 10_000, request_blocks: 1, read_fraction: 0.5, scatter: false, seed: 9 }
    }

    fn hot_share(pattern: Pattern, hot_blocks: u64) -> f64 {
        let draws = 200_000;
        let hot =
            SyntheticWorkload::new(spec(pattern)).take(draws).filter(|request| request.block < hot_blocks).count();
        hot as f64 / draws as f64
    }

    #[test]
    fn same_seed_same_requests() {
        let first: Vec<_> = SyntheticWorkload::new(spec(Pattern::Zipf { exponent: 1.1 })).take(100).collect();
        let second: Vec<_> = SyntheticWorkload::new(spec(Pattern::Zipf { exponent: 1.1 })).take(100).collect();
        assert_eq!(first, second);
    }

    #[test]
    fn skewed_patterns_put_their_share_on_the_hot_blocks() {
        let hot_cold = Pattern::HotCold { hot_block_fraction: 0.1, hot_access_fraction: 0.9 };
        assert!((hot_share(hot_cold, 1000) - 0.9).abs() < 0.01);
        assert!((hot_share(Pattern::eighty_twenty(0.8, 0.2), 2000) - 0.8).abs() < 0.01);
        // Self-similar: the hottest 4 % take 0.8² = 64 %.
        assert!((hot_share(Pattern::eighty_twenty(0.8, 0.2), 400) - 0.64).abs() < 0.01);
        assert!((hot_share(Pattern::Uniform, 5000) - 0.5).abs() < 0.01);
        assert!(hot_share(Pattern::Zipf { exponent: 1.0 }, 100) > 0.5);
    }

    #[test]
    fn scattering_keeps_the_skew_but_moves_the_hot_blocks() {
        let mut scattered = spec(Pattern::HotCold { hot_block_fraction: 0.1, hot_access_fraction: 0.9 });
        scattered.scatter = true;
        let low = SyntheticWorkload::new(scattered).take(100_000).filter(|request| request.block < 1000).count();
        assert!(low < 20_000, "the hot tenth is no longer the lowest tenth");
        let bijection = AffineBijection::new(10_000);
        let mut seen: Vec<u64> = (0..10_000).map(|slot| bijection.map(slot)).collect();
        seen.sort_unstable();
        assert!(seen.iter().enumerate().all(|(index, &slot)| slot == index as u64), "a bijection");
    }

    #[test]
    fn appenders_and_tpcb_follow_their_shape() {
        let mut appenders = spec(Pattern::InterleavedAppenders { stream_count: 4 });
        appenders.request_blocks = 2;
        let blocks: Vec<u64> = SyntheticWorkload::new(appenders).take(8).map(|request| request.block).collect();
        assert_eq!(blocks, [0, 2500, 5000, 7500, 2, 2502, 5002, 7502]);
        let pairs: Vec<_> = SyntheticWorkload::new(spec(Pattern::TpcB)).take(6).collect();
        for pair in pairs.chunks(2) {
            assert_eq!((pair[0].operation, pair[1].operation), (Operation::Read, Operation::Write));
            assert_eq!(pair[0].block, pair[1].block);
        }
        let sequential: Vec<u64> = SyntheticWorkload::new(spec(Pattern::Sequential)).take(3).map(|r| r.block).collect();
        assert_eq!(sequential, [0, 1, 2]);
    }

    #[test]
    fn open_loop_arrivals_have_the_asked_rate() {
        let requests: Vec<_> =
            open_loop(SyntheticWorkload::new(spec(Pattern::Uniform)), 1000.0, 4096, 1).take(20_001).collect();
        assert_eq!(requests[0].issue_ns, 0);
        let seconds = requests.last().unwrap().issue_ns as f64 / 1e9;
        assert!((seconds - 20.0).abs() < 0.5, "{seconds}");
        assert!(requests.windows(2).all(|pair| pair[0].issue_ns <= pair[1].issue_ns));
    }
}

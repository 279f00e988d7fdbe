//! Prints Figures 2 and 5 of the HyLog paper as measured on the independent
//! segment simulator: `cargo run --release -p proxima-lab --example
//! hylog_cleaning_tables -- [SEED] [SEGMENTS]` (defaults 1 and 4096).

use std::time::Instant;

use proxima_lab::seed001_hylog::cleaning_figures::{figure_2, figure_5, simulate, CleaningRunSpec, UTILIZATIONS};
use proxima_lab::seed001_hylog::segment_simulator::{CleaningPolicy, Separation};
use proxima_workload::synthetic::Pattern;

/// The utilisations of the hot-and-cold table.
const SEPARATION_UTILIZATIONS: [f64; 3] = [0.7, 0.8, 0.9];

fn main() {
    let mut arguments = std::env::args().skip(1);
    let seed: u64 = arguments.next().map_or(1, |text| text.parse().expect("SEED is a number"));
    let segments: u32 = arguments.next().map_or(4096, |text| text.parse().expect("SEGMENTS is a number"));
    let spec = CleaningRunSpec::atlas10k(segments, seed);
    println!(
        "segment simulator: {} segments of {} pages, A = {:.2}, warm-up {}× and measured {}× the data set, seed {}",
        spec.segment_count,
        spec.segment_pages,
        spec.segment_efficiency,
        spec.warmup_rewrites,
        spec.measured_rewrites,
        spec.seed
    );
    let started = Instant::now();
    println!("\nFigure 2: greedy cleaning, uniform random updates\n");
    println!("| u | u_c simulated | u_c Eq 2 | difference |\n| ---: | ---: | ---: | ---: |");
    for point in figure_2(&spec) {
        let difference = (point.uc_simulated - point.uc_eq2) / point.uc_eq2 * 100.0;
        println!("| {:.2} | {:.4} | {:.4} | {difference:+.2} % |", point.u, point.uc_simulated, point.uc_eq2);
    }
    println!("\nFigure 5: overall write cost W', uniform random updates\n");
    println!("| u | greedy | cost-age | hole-plugging | adaptive | adaptive / best |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: |");
    for point in figure_5(&spec) {
        let best = point.cost_age.min(point.hole_plugging);
        println!(
            "| {:.2} | {:.3} | {:.3} | {:.3} | {:.3} | {:.4} |",
            point.u,
            point.greedy,
            point.cost_age,
            point.hole_plugging,
            point.adaptive,
            point.adaptive / best
        );
    }
    println!(
        "\nHot and cold (10 % of the pages take 90 % of the writes): W' with one log and with hot and cold logs\n"
    );
    println!("| u | policy | one log | hot and cold logs |\n| ---: | --- | ---: | ---: |");
    let two_logs =
        CleaningRunSpec { separation: Separation::WriteFrequency { interval_writes: 0, hot_writes: 2 }, ..spec };
    let hot_cold = Pattern::HotCold { hot_block_fraction: 0.1, hot_access_fraction: 0.9 };
    let mut separation_writes = 0.0;
    for u in SEPARATION_UTILIZATIONS {
        for policy in CleaningPolicy::ALL {
            let one = simulate(&spec, u, policy, hot_cold).write_cost;
            let two = simulate(&two_logs, u, policy, hot_cold).write_cost;
            println!("| {u:.2} | {} | {one:.3} | {two:.3} |", policy.name());
            let pages = (f64::from(spec.segment_pages) * f64::from(spec.segment_count) * u).round();
            separation_writes += 2.0 * pages * (spec.warmup_rewrites + spec.measured_rewrites) as f64;
        }
    }
    // Figure 2 runs one policy per utilisation, Figure 5 four.
    let slots = f64::from(spec.segment_pages) * f64::from(spec.segment_count);
    let data_pages: f64 = UTILIZATIONS.iter().map(|u| (slots * u).round()).sum();
    let user_writes = 5.0 * data_pages * (spec.warmup_rewrites + spec.measured_rewrites) as f64 + separation_writes;
    let seconds = started.elapsed().as_secs_f64();
    println!("\n{user_writes:.0} user page writes simulated");
    println!("wall {seconds:.1} s, {:.2} million user page writes per second", user_writes / seconds / 1e6);
}

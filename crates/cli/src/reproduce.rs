//! `proxima reproduce NAME`: regenerates a paper's figures on the simulator. The
//! experiments are listed in `proxima_lab::EXPERIMENTS`; this module only parses
//! the arguments, shows progress, and prints the summary and the JSON headline
//! (the last line of stdout). It also holds the laboratory's progress bar, drawn
//! on stderr when it is a terminal and hidden when piped.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use proxima_lab::progress::Progress;
use proxima_lab::{
    find_experiment, proximal_disk, proximal_srarw, proximal_table2, proximal_table3, Experiment, LabError,
    ReproduceOptions, EXPERIMENTS,
};

/// `proxima reproduce`.
#[derive(Debug, Args)]
pub struct ReproduceArgs {
    /// The experiment (proximal-disk, proximal-table2, proximal-table3, proximal-srarw).
    experiment: String,
    /// Output directory [default: out/EXPERIMENT].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Seed of every simulation in the run.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Disk model: a built-in name or a DiskSim `.parv` file [default: the experiment's].
    #[arg(long)]
    model: Option<String>,
    /// Fraction of the paper's full size (the layout experiments: proximal-table2,
    /// proximal-table3, proximal-srarw) [default: the experiment's].
    #[arg(long)]
    scale: Option<f64>,
    /// Strands per point of a figure (proximal-disk) [default: the experiment's].
    #[arg(long)]
    count: Option<u32>,
    /// Independent simulations of a layout experiment run at once, one per
    /// thread (the figures are the same; peak memory is the sum of those in
    /// flight) [default: 1].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
    jobs: Option<u16>,
}

/// The flags of `reproduce` an experiment takes besides `--out`, `--seed` and
/// `--model` (which all take): the others would be ignored, so they are refused.
pub fn experiment_flags(experiment: &Experiment) -> &'static [&'static str] {
    match experiment.name {
        proximal_disk::NAME => &["--count"],
        proximal_table2::NAME | proximal_table3::NAME | proximal_srarw::NAME => &["--scale", "--jobs"],
        _ => &[],
    }
}

/// The first flag given that `experiment` does not take, if any.
fn inapplicable_flag(experiment: &Experiment, args: &ReproduceArgs) -> Option<&'static str> {
    let given = [("--scale", args.scale.is_some()), ("--count", args.count.is_some()), ("--jobs", args.jobs.is_some())];
    let takes = experiment_flags(experiment);
    given.into_iter().find(|(flag, given)| *given && !takes.contains(flag)).map(|(flag, _)| flag)
}

/// Runs `proxima reproduce`.
pub fn run(args: &ReproduceArgs) -> ExitCode {
    let Some(experiment) = find_experiment(&args.experiment) else {
        eprintln!("proxima reproduce: no experiment `{}`; known:", args.experiment);
        for known in EXPERIMENTS {
            eprintln!("  {:<16} {}", known.name, known.description);
        }
        return ExitCode::from(2);
    };
    if let Some(flag) = inapplicable_flag(experiment, args) {
        let takes = experiment_flags(experiment);
        let takes = if takes.is_empty() { "none of --scale, --count, --jobs".to_owned() } else { takes.join(", ") };
        eprintln!("proxima reproduce {}: {flag} does not apply to this experiment (it takes {takes})", experiment.name);
        return ExitCode::from(2);
    }
    let options = ReproduceOptions {
        out_dir: args.out.clone().unwrap_or_else(|| PathBuf::from("out").join(experiment.name)),
        seed: args.seed,
        model: args.model.clone().unwrap_or_else(|| experiment.default_model.to_string()),
        strand_count: args.count.unwrap_or(experiment.default_strand_count),
        scale: args.scale.or(experiment.default_scale),
        jobs: usize::from(args.jobs.unwrap_or(1)),
    };
    let jobs = if experiment_flags(experiment).contains(&"--jobs") {
        format!(", {} simulation(s) at once", options.jobs)
    } else {
        String::new()
    };
    eprintln!(
        "proxima reproduce {}: model {}, seed {}{jobs}, writing to {}",
        experiment.name,
        options.model,
        options.seed,
        options.out_dir.display()
    );
    let mut progress = TerminalProgress::new();
    let outcome = (experiment.run)(&options, &mut progress);
    progress.finish();
    match outcome {
        Ok(outcome) => {
            print!("{}", outcome.summary);
            println!("report: {}", outcome.report_path.display());
            println!("{}", outcome.headline);
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("proxima reproduce {}: {error}", experiment.name);
            match error {
                LabError::InvalidParameter { .. } | LabError::Model { .. } => ExitCode::from(2),
                _ => ExitCode::from(1),
            }
        }
    }
}

/// An indicatif bar behind the laboratory's [`Progress`] trait.
#[derive(Debug)]
pub struct TerminalProgress {
    bar: ProgressBar,
}

impl TerminalProgress {
    /// A bar on stderr, hidden unless stderr is a terminal.
    pub fn new() -> TerminalProgress {
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template("{msg:40} [{bar:30}] {pos}/{len} {elapsed_precise}")
            .expect("the template is valid")
            .progress_chars("=> ");
        bar.set_style(style);
        TerminalProgress { bar }
    }

    /// Starts a phase (same as [`Progress::start_phase`]).
    pub fn begin(&mut self, phase: &str, total_units: u64) {
        self.start_phase(phase, total_units);
    }

    /// Clears the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Progress for TerminalProgress {
    fn start_phase(&mut self, phase: &str, total_units: u64) {
        self.bar.set_message(phase.to_string());
        self.bar.set_length(total_units);
        self.bar.set_position(0);
    }

    fn advance(&mut self, units: u64) {
        self.bar.inc(units);
    }
}

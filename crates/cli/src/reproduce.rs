//! `proxima reproduce EXPERIMENT [FLAGS]`: regenerates a paper's figures on the
//! simulator. Each experiment registered in `proxima_lab::EXPERIMENTS` is a
//! subcommand with its own flags (`--out`, `--seed` and `--model` for all, and
//! the experiment's own), so a flag that does not apply is a usage error.
//! This module only parses the arguments, shows progress, and prints the
//! summary and the JSON headline (the last line of stdout). It also holds the
//! laboratory's progress bar, drawn on stderr when it is a terminal and hidden
//! when piped.

use std::process::ExitCode;

use clap::{ArgMatches, Args, FromArgMatches};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use proxima_lab::progress::Progress;
use proxima_lab::{find_experiment, LabError, EXPERIMENTS};

/// `proxima reproduce`: the experiment (a subcommand) and its flags.
#[derive(Debug, Clone)]
pub struct ReproduceArgs {
    experiment: String,
    matches: ArgMatches,
}

impl FromArgMatches for ReproduceArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let (experiment, matches) = matches
            .subcommand()
            .ok_or_else(|| clap::Error::raw(clap::error::ErrorKind::MissingSubcommand, "name an experiment\n"))?;
        Ok(ReproduceArgs { experiment: experiment.to_owned(), matches: matches.clone() })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = ReproduceArgs::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Args for ReproduceArgs {
    fn augment_args(command: clap::Command) -> clap::Command {
        command
            .subcommand_required(true)
            .subcommand_value_name("EXPERIMENT")
            .subcommand_help_heading("Experiments")
            .subcommands(EXPERIMENTS.iter().map(|experiment| experiment.command()))
    }

    fn augment_args_for_update(command: clap::Command) -> clap::Command {
        ReproduceArgs::augment_args(command)
    }
}

/// Runs `proxima reproduce`.
pub fn run(args: &ReproduceArgs) -> ExitCode {
    let Some(experiment) = find_experiment(&args.experiment) else {
        eprintln!("proxima reproduce: no experiment `{}`", args.experiment);
        return ExitCode::from(2);
    };
    let invocation = match experiment.invocation(&args.matches) {
        Ok(invocation) => invocation,
        Err(error) => {
            eprintln!("proxima reproduce {}: {error}", experiment.name());
            return ExitCode::from(2);
        }
    };
    let settings = invocation.run_settings();
    eprintln!(
        "proxima reproduce {}: model {}, seed {}{}, writing to {}",
        experiment.name(),
        settings.model,
        settings.seed,
        invocation.describe(),
        settings.out_dir.display()
    );
    let mut progress = TerminalProgress::new();
    let outcome = invocation.run(&mut progress);
    progress.finish();
    match outcome {
        Ok(outcome) => {
            print!("{}", outcome.summary);
            println!("report: {}", outcome.report_path.display());
            println!("{}", outcome.headline);
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("proxima reproduce {}: {error}", experiment.name());
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

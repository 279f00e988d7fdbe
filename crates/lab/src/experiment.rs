//! The typed experiment interface, the one skeleton that runs an experiment,
//! and the registration through which `proxima reproduce` finds it.
//!
//! An [`Experiment`] has its own command-line parameters ([`Experiment::Params`],
//! a `clap::Args`: a flag that does not apply to it cannot be passed), the
//! settings it resolves them to, the rows it measures and the headline it
//! reports. Running is split in two:
//!
//! - [`Experiment::measure`] runs the simulations and returns the rows — the
//!   only step that takes time; rows are `Serialize + Deserialize`, so they
//!   can be saved.
//! - [`Experiment::render`] turns rows into every file (CSV, SVG, `report.md`),
//!   the summary and the headline, without I/O: the same rows give the same
//!   files, whether just measured or read back.
//!
//! [`run`] is the skeleton: settings, output directory, measurement, rendering,
//! writing. [`Registration`] erases an experiment's types behind [`Registered`]
//! for the registry in `lib.rs`; its headline is printed as one JSON line.
//!
//! Invariant: what an experiment writes depends on its settings and rows
//! alone, except the wall time and memory ([`WallCost`]) its report quotes.

use std::fmt::Debug;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::time::Instant;

use clap::{ArgMatches, Args, FromArgMatches};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::progress::Progress;
use crate::report::cost::WallCost;
use crate::report::markdown::{create_directory, write_rendered, Rendered};
use crate::LabError;

/// The settings every experiment takes, resolved from the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSettings {
    /// Directory that receives the CSV files, plots and `report.md`.
    pub out_dir: PathBuf,
    /// Seed of every simulation in the run.
    pub seed: u64,
    /// Disk model: a built-in name or a DiskSim `.parv` path.
    pub model: String,
}

/// The flags every experiment takes.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// Output directory [default: out/EXPERIMENT].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Seed of every simulation in the run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Disk model: a built-in name or a DiskSim `.parv` file.
    #[arg(long)]
    pub model: Option<String>,
}

impl CommonArgs {
    /// The settings of a run of the experiment `name`, whose drive is
    /// `default_model` unless another is given.
    pub fn settings(&self, name: &str, default_model: &str) -> RunSettings {
        RunSettings {
            out_dir: self.out.clone().unwrap_or_else(|| PathBuf::from("out").join(name)),
            seed: self.seed,
            model: self.model.clone().unwrap_or_else(|| default_model.to_owned()),
        }
    }
}

/// A reproducible experiment.
pub trait Experiment: 'static {
    /// Its name on the command line.
    const NAME: &'static str;
    /// One line saying what it regenerates.
    const DESCRIPTION: &'static str;
    /// The drive model when none is given.
    const DEFAULT_MODEL: &'static str;
    /// Its own flags, besides `--out`, `--seed` and `--model`.
    type Params: Args + Debug + Clone;
    /// The parameters resolved and checked: what measuring and rendering need.
    type Settings;
    /// What a measurement produces, from which every file is rendered.
    type Rows: Serialize + DeserializeOwned;
    /// The headline figures, printed as one JSON line.
    type Headline: Serialize + DeserializeOwned;

    /// Resolves and checks the parameters (a bad one is
    /// [`LabError::InvalidParameter`] or [`LabError::Model`]).
    fn settings(run: &RunSettings, params: &Self::Params) -> Result<Self::Settings, LabError>;

    /// Runs the simulations.
    fn measure(settings: &Self::Settings, progress: &mut dyn Progress) -> Result<Self::Rows, LabError>;

    /// Every file, the summary and the headline, from the rows; `cost` is what
    /// the measurement took on this machine.
    fn render(settings: &Self::Settings, rows: &Self::Rows, cost: &WallCost) -> Rendered<Self::Headline>;

    /// What the run's opening line says after the model and seed (for example
    /// how many simulations run at once).
    fn describe(_params: &Self::Params) -> String {
        String::new()
    }
}

/// What a run produced, typed.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome<Headline> {
    /// A short human-readable table of the headline figures.
    pub summary: String,
    /// The headline figures.
    pub headline: Headline,
    /// The markdown report written.
    pub report_path: PathBuf,
}

/// Runs experiment `E`: resolves its settings, creates the output directory,
/// measures, renders and writes every file.
pub fn run<E: Experiment>(
    run: &RunSettings,
    params: &E::Params,
    progress: &mut dyn Progress,
) -> Result<Outcome<E::Headline>, LabError> {
    let settings = E::settings(run, params)?;
    create_directory(&run.out_dir)?;
    let started = Instant::now();
    let rows = E::measure(&settings, progress)?;
    let rendered = E::render(&settings, &rows, &WallCost::since(started));
    let report_path = write_rendered(&run.out_dir, &rendered)?;
    Ok(Outcome { summary: rendered.summary, headline: rendered.headline, report_path })
}

/// Measures experiment `E` without rendering: the rows to save.
pub fn measure<E: Experiment>(
    run: &RunSettings,
    params: &E::Params,
    progress: &mut dyn Progress,
) -> Result<E::Rows, LabError> {
    E::measure(&E::settings(run, params)?, progress)
}

/// Renders saved rows of experiment `E`, as the run that measured them did.
pub fn render<E: Experiment>(
    run: &RunSettings,
    params: &E::Params,
    rows: &E::Rows,
    cost: &WallCost,
) -> Result<Rendered<E::Headline>, LabError> {
    Ok(E::render(&E::settings(run, params)?, rows, cost))
}

/// What a run produced, its headline as JSON (for the command line).
#[derive(Debug, Clone, PartialEq)]
pub struct ExperimentOutcome {
    /// A short human-readable table of the headline figures.
    pub summary: String,
    /// The headline figures as one JSON object.
    pub headline: serde_json::Value,
    /// The markdown report written.
    pub report_path: PathBuf,
}

/// An experiment as the registry holds it, its types erased.
pub trait Registered: Sync {
    /// Its name on the command line.
    fn name(&self) -> &'static str;
    /// One line saying what it regenerates.
    fn description(&self) -> &'static str;
    /// Its subcommand: the common flags and its own.
    fn command(&self) -> clap::Command;
    /// A run of it from the matches of [`Registered::command`].
    fn invocation(&self, matches: &ArgMatches) -> Result<Box<dyn Invocation>, clap::Error>;
}

/// A run of a registered experiment, its parameters parsed.
pub trait Invocation {
    /// The settings every experiment takes.
    fn run_settings(&self) -> &RunSettings;
    /// What the run's opening line says after the model and seed.
    fn describe(&self) -> String;
    /// Runs it and writes its files.
    fn run(&self, progress: &mut dyn Progress) -> Result<ExperimentOutcome, LabError>;
}

/// The registration of experiment `E`.
pub struct Registration<E>(PhantomData<fn() -> E>);

impl<E> Registration<E> {
    /// The registration (a constant, for the registry).
    pub const NEW: Registration<E> = Registration(PhantomData);
}

impl<E: Experiment> Debug for Registration<E> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_tuple("Registration").field(&E::NAME).finish()
    }
}

impl<E: Experiment> Registered for Registration<E> {
    fn name(&self) -> &'static str {
        E::NAME
    }

    fn description(&self) -> &'static str {
        E::DESCRIPTION
    }

    fn command(&self) -> clap::Command {
        let command = CommonArgs::augment_args(clap::Command::new(E::NAME));
        let command = command.mut_arg("model", |model| model.default_value(E::DEFAULT_MODEL));
        // After the parameters, whose own doc comment would otherwise be the about.
        E::Params::augment_args(command).about(E::DESCRIPTION)
    }

    fn invocation(&self, matches: &ArgMatches) -> Result<Box<dyn Invocation>, clap::Error> {
        let common = CommonArgs::from_arg_matches(matches)?;
        let params = E::Params::from_arg_matches(matches)?;
        Ok(Box::new(TypedInvocation::<E> { run: common.settings(E::NAME, E::DEFAULT_MODEL), params }))
    }
}

struct TypedInvocation<E: Experiment> {
    run: RunSettings,
    params: E::Params,
}

impl<E: Experiment> Invocation for TypedInvocation<E> {
    fn run_settings(&self) -> &RunSettings {
        &self.run
    }

    fn describe(&self) -> String {
        E::describe(&self.params)
    }

    fn run(&self, progress: &mut dyn Progress) -> Result<ExperimentOutcome, LabError> {
        let outcome = run::<E>(&self.run, &self.params, progress)?;
        // Through a JSON value, as the line scripts read has always been
        // printed (the value's objects order their keys).
        let headline = serde_json::to_value(&outcome.headline).expect("the headline serialises");
        Ok(ExperimentOutcome { summary: outcome.summary, headline, report_path: outcome.report_path })
    }
}

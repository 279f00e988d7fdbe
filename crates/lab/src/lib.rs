//! Experiments: each reproduced table or figure, with CSV, plots and markdown reports.

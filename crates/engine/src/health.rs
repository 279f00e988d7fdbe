//! The volume's health: what recovery found when it was opened, and whether
//! an operation failed in a way that stops the volume (its in-memory state may
//! no longer match the devices, so nothing may commit until it is reopened).
//! Once stopped, a volume stays stopped: the first reason is kept.

use crate::error::{EngineError, Result};
use crate::log::RecoveryReport;

/// The volume's health.
#[derive(Debug, Default)]
pub(crate) struct Health {
    /// Why the volume stopped accepting operations, if it did.
    failure: Option<String>,
    /// What the recovery at open found.
    recovery: RecoveryReport,
}

impl Health {
    /// Healthy, with what the recovery at open found.
    pub(crate) fn recovered(recovery: RecoveryReport) -> Self {
        Self { failure: None, recovery }
    }

    /// Stops the volume for `reason`, unless it is stopped already.
    pub(crate) fn stop(&mut self, reason: String) {
        self.failure.get_or_insert(reason);
    }

    /// [`EngineError::Failed`] once the volume has stopped.
    pub(crate) fn check_usable(&self) -> Result<()> {
        match &self.failure {
            Some(reason) => Err(EngineError::Failed(reason.clone())),
            None => Ok(()),
        }
    }

    /// Why the volume stopped, if it did.
    pub(crate) fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    /// What the recovery at open found.
    pub(crate) fn recovery(&self) -> &RecoveryReport {
        &self.recovery
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_volume_stays_stopped_for_its_first_reason() {
        let mut health = Health::default();
        assert!(health.check_usable().is_ok());
        health.stop("first".to_string());
        health.stop("second".to_string());
        assert_eq!(health.failure(), Some("first"));
        assert!(matches!(health.check_usable(), Err(EngineError::Failed(reason)) if reason == "first"));
    }
}

//! Simulated storage devices in virtual time: the discrete-event clock, the hard-disk model, the DiskSim 4.0 parameter loader, and the flash model.

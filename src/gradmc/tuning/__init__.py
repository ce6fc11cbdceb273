"""Tools that drive runs: step-size search, W calibration."""

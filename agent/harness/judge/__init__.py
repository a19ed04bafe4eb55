"""The parent's verdict from what a worker reported: trials, validation, the run-time rules, the verdict."""

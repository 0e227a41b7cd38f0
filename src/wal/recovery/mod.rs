//! Reading the log back after a start or a crash.

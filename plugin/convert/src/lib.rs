//! The conversion engine (issue 3).

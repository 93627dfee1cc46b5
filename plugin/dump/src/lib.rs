//! Readers for msprobe dump folders (issue 3).

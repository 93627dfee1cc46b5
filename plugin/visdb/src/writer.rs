//! Writes a `.vis.db` the way msprobe does: one transaction into a temporary file beside the
//! destination, indexes last, then an atomic rename. Owned by the converter work (issue 3).

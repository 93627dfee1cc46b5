//! Our own table of what the diagnosis reads, added to a finished compare file before it takes
//! its name (`docs/visdb.md` §5): `convert` and `gather` call [`add_before_rename`] as their
//! writer's last step. msprobe's tables are already complete then and stay as they are.

use std::path::Path;

/// Writes the diagnosis's table into the temporary compare file at `temp` (a build is left as
/// it is). A failure leaves the file without the table, which stays a complete file (the
/// diagnosis then reads its rows): it is told on stderr, never fails the conversion.
pub(crate) fn add_before_rename(temp: &Path) -> std::io::Result<()> {
    let p = crate::timing::phase(|| "diagnosis table".into());
    if let Err(e) = graph_ascend_diagnose::write_compact_table(temp) {
        eprintln!(
            "graph-ascend: warning: the diagnosis's own table was not written ({e}); the \
             diagnosis will read the rows instead"
        );
    }
    p.done();
    Ok(())
}

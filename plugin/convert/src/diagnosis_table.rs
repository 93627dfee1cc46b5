//! Our own table of what the diagnosis reads, added to a finished compare file before it takes
//! its name (`docs/visdb.md` §5): `convert` makes it of the rows as it writes them
//! ([`add_built_before_rename`], a [`TableBuilder`] fed by the writer), `gather` reads its file
//! back ([`add_before_rename`]); either is the writer's last step. msprobe's tables are already
//! complete then and stay as they are.

use graph_ascend_diagnose::TableBuilder;

use std::path::Path;

/// Writes the diagnosis's table into the temporary compare file at `temp` (a build is left as
/// it is). A failure leaves the file without the table, which stays a complete file (the
/// diagnosis then reads its rows): it is told on stderr, never fails the conversion.
pub(crate) fn add_before_rename(temp: &Path) -> std::io::Result<()> {
    let p = crate::timing::phase(|| "diagnosis table".into());
    warn_unwritten(graph_ascend_diagnose::write_compact_table(temp));
    p.done();
    Ok(())
}

/// [`add_before_rename`] with the table made of the rows as they were written (`table`).
pub(crate) fn add_built_before_rename(table: TableBuilder, temp: &Path) -> std::io::Result<()> {
    let p = crate::timing::phase(|| "diagnosis table".into());
    warn_unwritten(table.write_into(temp));
    p.done();
    Ok(())
}

fn warn_unwritten(written: Result<usize, graph_ascend_diagnose::DiagnoseError>) {
    if let Err(e) = written {
        eprintln!(
            "graph-ascend: warning: the diagnosis's own table was not written ({e}); the \
             diagnosis will read the rows instead"
        );
    }
}

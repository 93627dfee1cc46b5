//! Copies of a compare file's graphs inside the file, made with SQL: a run of more steps or ranks
//! than a fixture holds, for the tests and benches of the diagnosis and its map.

use rusqlite::Connection;

use graph_ascend_visdb::schema::NODE_COLUMNS;

/// Which graphs' rows to copy (`None`: any step, any rank) or, as a target, the step and rank the
/// copies take (`None`: the row's own).
#[derive(Debug, Clone, Copy, Default)]
pub struct Graphs {
    pub step: Option<i64>,
    pub rank: Option<i64>,
}

/// Copies the `tb_nodes` rows of the graphs `from` to the step and rank `to`, each id followed by
/// `id_suffix` (ids stay unique); returns the rows copied.
pub fn copy_nodes(
    db: &Connection,
    from: Graphs,
    to: Graphs,
    id_suffix: &str,
) -> rusqlite::Result<usize> {
    let columns = NODE_COLUMNS
        .iter()
        .filter(|c| !matches!(**c, "id" | "step" | "rank"))
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    db.execute(
        &format!(
            "INSERT INTO tb_nodes (id, step, rank, {columns}) \
             SELECT id || ?1, coalesce(?2, step), coalesce(?3, rank), {columns} FROM tb_nodes \
             WHERE (?4 IS NULL OR step = ?4) AND (?5 IS NULL OR rank = ?5)"
        ),
        rusqlite::params![id_suffix, to.step, to.rank, from.step, from.rank],
    )
}

/// Copies step 0 (every rank) to steps `1..steps` (ids followed by `_s<step>`), with our own
/// diagnosis table's rows of step 0 when `our_table` and the file has one, and sets the file's
/// step list to `0..steps`.
pub fn copy_step_zero(db: &Connection, steps: i64, our_table: bool) -> rusqlite::Result<()> {
    let ours: Vec<String> = if our_table {
        let mut stmt = db.prepare("SELECT name FROM pragma_table_info('ga_diagnosis')")?;
        let names = stmt.query_map([], |r| r.get::<_, String>(0))?;
        names
            .filter(|n| !matches!(n.as_deref(), Ok("step")))
            .collect::<rusqlite::Result<_>>()?
    } else {
        Vec::new()
    };
    for step in 1..steps {
        let at_step = Graphs {
            step: Some(step),
            rank: None,
        };
        let zero = Graphs {
            step: Some(0),
            rank: None,
        };
        copy_nodes(db, zero, at_step, &format!("_s{step}"))?;
        if !ours.is_empty() {
            let o = ours.join(", ");
            db.execute(
                &format!(
                    "INSERT INTO ga_diagnosis (step, {o}) SELECT ?1, {o} FROM ga_diagnosis \
                     WHERE step = 0"
                ),
                [step],
            )?;
        }
    }
    db.execute("UPDATE tb_config SET step_list = ?1", [number_list(steps)])?;
    Ok(())
}

/// `[0, 1, …, n - 1]`, as a file's step and rank lists are written.
pub fn number_list(n: i64) -> String {
    let items: Vec<String> = (0..n).map(|v| v.to_string()).collect();
    format!("[{}]", items.join(", "))
}

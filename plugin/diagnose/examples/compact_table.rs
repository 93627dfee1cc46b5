//! `compact_table FILE.vis.db`: writes our own diagnosis table into a compare file
//! (`graph_ascend_diagnose::write_compact_table`, what `convert` and `gather` do as their last
//! step): for files written before the table existed, and for benchmarks.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args_os()
        .nth(1)
        .ok_or("usage: compact_table FILE.vis.db")?;
    let started = std::time::Instant::now();
    let graphs = graph_ascend_diagnose::write_compact_table(path.as_ref())?;
    println!(
        "{}: the diagnosis table of {graphs} graph(s) written in {:.2} s",
        std::path::Path::new(&path).display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

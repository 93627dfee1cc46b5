//! `gen_dump OUT_DIR ENTRIES [--perturb] [--ranks R] [--steps S]`: synthetic msprobe dumps of any
//! size (`graph_ascend_testkit::synthetic_dump`), for the converter and scale benchmarks. Prints
//! each rank folder written with its number of entries.

use std::path::PathBuf;

use graph_ascend_testkit::synthetic_dump::{self, DumpShape};

/// The value after flag `name`, or `default`.
fn flag(args: &[String], name: &str, default: usize) -> Result<usize, Box<dyn std::error::Error>> {
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => Ok(args.get(i + 1).ok_or("flag without a value")?.parse()?),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: gen_dump OUT_DIR ENTRIES [--perturb] [--ranks R] [--steps S]");
        std::process::exit(2);
    }
    let shape = DumpShape {
        entries: args[2].parse()?,
        perturb: args.iter().any(|a| a == "--perturb"),
        ranks: flag(&args, "--ranks", 1)?,
        steps: flag(&args, "--steps", 1)?,
    };
    for (dir, entries) in synthetic_dump::write(&PathBuf::from(&args[1]), shape)? {
        println!("{} ({entries} entries)", dir.display());
    }
    Ok(())
}

//! Compiles `proto/graph_ascend.proto` with protox (pure Rust, no `protoc` needed) and keeps the
//! FileDescriptorSet, which the binary hands to the Python shim (`graph-ascend proto-descriptor`).
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let file = root.join("graph_ascend.proto");
    // Relative to the package (as Cargo reads it), not absolute: a checkout elsewhere sharing the same
    // CARGO_TARGET_DIR (tests/wheel's `make install` test) must not rebuild everything after this crate.
    println!("cargo:rerun-if-changed=../../proto/graph_ascend.proto");
    let mut compiler = protox::Compiler::new([&root])?;
    compiler.include_imports(true);
    compiler.open_file(&file)?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    // Encoded by protox itself: prost's descriptor types would drop the custom options
    // (`http`, `json_map_key`, ...) that the shim reads.
    std::fs::write(
        out.join("graph_ascend_descriptor.bin"),
        compiler.encode_file_descriptor_set(),
    )?;
    let fds = compiler.file_descriptor_set();
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}

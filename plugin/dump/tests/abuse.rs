//! Crafted dump files are clear errors naming the file and the problem: never a stack overflow,
//! never a silently wrong answer.

use std::path::Path;

use graph_ascend_dump::{Confine, Construct, DumpError, DumpFile};

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}

fn assert_names_file(err: &DumpError, path: &Path, problem: &str) {
    let text = err.to_string();
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(text.contains(problem), "{text}");
}

/// Regression (defect 3): an entry nested 10,000 deep aborted the converter (stack overflow in
/// the fast reader). The fast reader now gives up, and the `serde_json` reader names the file.
#[test]
fn a_dump_json_nested_10000_deep_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let depth = 10_000;
    let text = format!(
        "{{\"task\": \"statistics\", \"level\": \"L0\", \"data\": {{\"Functional.linear.0.forward\": \
         {{\"input_args\": {}1{}}}}}}}",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let path = write(dir.path(), "dump.json", &text);
    let fast = DumpFile::read_fast_batches(&path, &Confine::anywhere(), 1 << 16, &mut |batch| {
        for i in 0..batch.len() {
            batch.parse(i)?;
        }
        Ok(())
    })
    .expect("the file opens");
    assert!(fast.is_none(), "the fast reader refuses it");
    let err = DumpFile::read_streaming(&path, &Confine::anywhere(), &mut |_, _| {})
        .expect_err("too deep");
    assert_names_file(&err, &path, "recursion limit");
    let err = DumpFile::read(&path, &Confine::anywhere()).expect_err("too deep");
    assert_names_file(&err, &path, "recursion limit");
}

/// Regression (defect 5): a parent cycle in `construct.json` silently dropped the nodes on it
/// (and everything below them) from the graph.
#[test]
fn a_parent_cycle_in_construct_json_is_an_error_naming_the_node() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        (
            "self",
            r#"{"Module.a.A.forward.0": null, "Module.b.B.forward.0": "Module.b.B.forward.0"}"#,
            "Module.b.B.forward.0",
        ),
        (
            "two",
            r#"{"Module.a.A.forward.0": "Module.b.B.forward.0",
                "Module.b.B.forward.0": "Module.a.A.forward.0",
                "Functional.linear.0.forward": "Module.a.A.forward.0"}"#,
            "Module.a.A.forward.0",
        ),
        (
            "megatron",
            r#"{"megatron_micro_step_number": 2,
                "Module.a.A.forward.0": ["Module.c.C.forward.0", 0],
                "Module.b.B.forward.0": ["Module.a.A.forward.0", 0],
                "Module.c.C.forward.0": ["Module.b.B.forward.0", 1]}"#,
            "Module.a.A.forward.0",
        ),
    ];
    for (name, text, node) in cases {
        let path = write(dir.path(), &format!("{name}.json"), text);
        let err = Construct::read(&path, &Confine::anywhere()).expect_err(name);
        assert_names_file(&err, &path, node);
        assert_names_file(&err, &path, "its own ancestor");
    }
    // Chains, shared parents and parents that are not keys are fine.
    let path = write(
        dir.path(),
        "good.json",
        r#"{"Module.a.A.forward.0": null, "Module.b.B.forward.0": "Module.a.A.forward.0",
            "Functional.linear.0.forward": "Module.b.B.forward.0",
            "Functional.relu.0.forward": "Module.b.B.forward.0",
            "Tensor.add.0.forward": "Module.elsewhere.forward.0"}"#,
    );
    assert_eq!(
        Construct::read(&path, &Confine::anywhere())
            .expect("good")
            .entries
            .len(),
        5
    );
}

//! Edits cut short: what a kill in the middle of a large edit leaves is read as the file before
//! the edit or after it, never as a half-written file (`docs/service.md`, "What a kill leaves").
//!
//! The edit of these tests is a large one, as a matching edit of a module with thousands of
//! descendants is: it rewrites every row of `tb_nodes` with a connection whose page cache holds
//! a few pages only, so that SQLite spills changed pages into the main file long before the
//! commit (the rolled-back pages wait in the `-journal` in rollback-journal mode, our files'
//! mode; in WAL mode, msprobe's, the changed pages go to the `-wal`).
//!
//! - [`a_kill_mid_edit_is_rolled_back_before_any_read`] (fast, `make test`): the files an edit
//!   leaves after its spills, copied as a kill there would leave them, read as before the edit.
//! - [`a_hot_journal_that_cannot_be_rolled_back_is_refused`]: the same copy, read by a
//!   connection that cannot write it, is refused naming the journal.
//! - [`kill_loop`] (`make test-torn`, `TORN_KILLS` kills; a short slice in `make test`): a child
//!   process edits in a loop and is killed with SIGKILL at a random point, again and again; after
//!   each kill, the file is opened as the sidecar opens it and must pass `integrity_check` and
//!   hold one of the states the edits write, whole.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::open::Store;

/// The child process of [`kill_loop`] edits the file this names, until it is killed.
const CHILD_ENV: &str = "GA_TORN_CHILD_FILE";

/// A copy of the example file written by msprobe (WAL mode), in rollback-journal mode (our
/// files' mode) unless `wal`.
fn example_copy(dir: &Path, wal: bool) -> PathBuf {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/build_tf_stats");
    let src = std::fs::read_dir(&examples)
        .expect("examples/build_tf_stats")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".vis.db"))
        .expect("an example .vis.db");
    std::fs::create_dir_all(dir).expect("mkdir");
    let path = dir.join("build.vis.db");
    std::fs::copy(&src, &path).expect("copy");
    if !wal {
        let conn = rusqlite::Connection::open(&path).expect("open the copy");
        let mode: String = conn
            .query_row("PRAGMA journal_mode=delete", [], |r| r.get(0))
            .expect("rollback-journal mode");
        assert_eq!(mode, "delete");
    }
    path
}

/// The large edit: every node's `input_data` and `matched_node_link` rewritten to version
/// `version` (about 1.4 MB over 344 rows), on `store`'s connection with a page cache of 8 pages.
fn big_edit_sql(version: u32) -> String {
    format!(
        "UPDATE tb_nodes SET matched_node_link = '[\"v{version}\"]', \
         input_data = '{{\"v\": \"' || printf('%.*c', 4000, '{}') || '\"}}'",
        char::from(b'a' + u8::try_from(version % 26).unwrap_or(0))
    )
}

fn big_edit(store: &Store, version: u32) {
    store
        .conn
        .pragma_update(None, "cache_size", 8)
        .expect("small cache");
    store
        .write(|s| {
            s.conn
                .execute_batch(&big_edit_sql(version))
                .map_err(|e| s.query_err(e))
        })
        .expect("edit");
}

/// What the file says, read through `store`: the links of its nodes and a digest of their data
/// (one statement), and `integrity_check`.
fn state_of(store: &Store) -> (String, String) {
    let state: String = store
        .conn
        .query_row(
            "SELECT count(*) || ' ' || ifnull(group_concat(DISTINCT matched_node_link), '') \
             || ' ' || sum(length(input_data)) || ' ' || \
             ifnull(group_concat(DISTINCT substr(input_data, 8, 1)), '') FROM tb_nodes",
            [],
            |r| r.get(0),
        )
        .unwrap_or_else(|e| format!("unreadable: {e}"));
    let integrity: String = store
        .conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap_or_else(|e| format!("unreadable: {e}"));
    (state, integrity)
}

/// The state of a fresh copy, and of one after each edit version `0..versions`.
fn valid_states(dir: &Path, wal: bool, versions: u32) -> Vec<String> {
    let sub = dir.join("states");
    std::fs::create_dir_all(&sub).expect("mkdir");
    let path = example_copy(&sub, wal);
    let mut states = vec![state_of(&Store::open(&path).expect("open")).0];
    for version in 0..versions {
        big_edit(
            &Store::open_for_edit(&path).expect("open for edit"),
            version,
        );
        states.push(state_of(&Store::open(&path).expect("open")).0);
    }
    std::fs::remove_dir_all(&sub).expect("rm");
    states
}

/// Copies `<path>` and whichever of its `-journal`, `-wal`, `-shm` exist into `to`: what a kill
/// at this moment leaves (a kill loses nothing the process wrote, only what it did not).
fn copy_as_killed(path: &Path, to: &Path) -> PathBuf {
    std::fs::create_dir_all(to).expect("mkdir");
    let copy = to.join(path.file_name().expect("name"));
    for suffix in ["", "-journal", "-wal", "-shm"] {
        let from = PathBuf::from(format!("{}{suffix}", path.display()));
        if from.exists() {
            std::fs::copy(&from, format!("{}{suffix}", copy.display())).expect("copy");
        }
    }
    copy
}

/// The files an edit leaves after spilling pages into the main file, before its commit.
fn killed_mid_edit(dir: &Path) -> PathBuf {
    let path = example_copy(dir, false);
    let editor = Store::open_for_edit(&path).expect("open for edit");
    editor
        .conn
        .pragma_update(None, "cache_size", 8)
        .expect("small cache");
    let left = dir.join("left");
    let copy = std::cell::RefCell::new(None);
    let _ = editor.write(|s| {
        s.conn
            .execute_batch(&big_edit_sql(7))
            .map_err(|e| s.query_err(e))?;
        *copy.borrow_mut() = Some(copy_as_killed(&path, &left));
        // Rolled back: the original file stays as it was.
        Err::<(), _>(s.data_err("test", "not committed"))
    });
    copy.into_inner().expect("copied")
}

/// Regression (issue 42, item 1): a kill during a large edit of a file in rollback-journal mode
/// left changed pages in the main file and the rolled-back ones in a hot `-journal`; the file
/// was then opened `immutable` (no `-wal` beside it), so SQLite never rolled the journal back:
/// wrong answers, once a structurally corrupt file.
#[test]
fn a_kill_mid_edit_is_rolled_back_before_any_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let before = state_of(&Store::open(&example_copy(&dir.path().join("o"), false)).unwrap()).0;
    let copy = killed_mid_edit(dir.path());
    let journal = PathBuf::from(format!("{}-journal", copy.display()));
    assert!(journal.exists(), "the edit left a journal");
    // The main file alone is half-edited: the test shows something.
    let raw = rusqlite::Connection::open_with_flags(
        format!("file:{}?immutable=1", copy.display()),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI,
    )
    .expect("raw open");
    let half: Result<String, _> = raw.query_row(
        "SELECT group_concat(DISTINCT matched_node_link) FROM tb_nodes",
        [],
        |r| r.get(0),
    );
    assert!(
        half.as_ref().map_or(true, |links| links.contains("v7")),
        "some pages of the edit are in the main file: {half:?}"
    );
    drop(raw);
    let store = Store::open(&copy).expect("open");
    assert_eq!(state_of(&store), (before, "ok".to_owned()));
    assert!(!journal.exists(), "the journal was rolled back and removed");
}

/// A hot journal that the reader cannot roll back (a read-only file or folder) is refused, the
/// error naming the file and the journal, and the half-edited file is not read.
#[test]
fn a_hot_journal_that_cannot_be_rolled_back_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let copy = killed_mid_edit(dir.path());
    let err = match Store::open_read_only_for_test(&copy) {
        Ok(_) => panic!("a half-edited file was opened"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains(&copy.display().to_string()), "{err}");
    assert!(err.contains("-journal"), "{err}");
    assert!(err.contains("cut short"), "{err}");
    assert!(PathBuf::from(format!("{}-journal", copy.display())).exists());
}

/// The child of [`kill_loop`]: edits the file named by [`CHILD_ENV`], alternating versions,
/// until it is killed (returns at once when run without it).
#[test]
#[ignore = "the child process of kill_loop"]
fn kill_loop_child() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let path = PathBuf::from(path);
    for version in (0..2).cycle() {
        big_edit(
            &Store::open_for_edit(&path).expect("open for edit"),
            version,
        );
    }
}

/// A small generator of kill times (no dependency for it).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n.max(1)
    }
}

/// `kills` kills of a child editing a file in rollback-journal mode (and as many of one in WAL
/// mode, when `wal`); returns how many left a journal or a log that had to be read past.
fn kill_loop(kills: u32, wal: bool) -> u32 {
    let dir = tempfile::tempdir().expect("tempdir");
    let states = valid_states(dir.path(), wal, 2);
    let exe = std::env::current_exe().expect("the test binary");
    let mut times = Lcg(u64::from(kills) * 7919 + u64::from(wal));
    let mut recovered = 0;
    for kill in 0..kills {
        let sub = dir.path().join(format!("k{kill}"));
        std::fs::create_dir(&sub).expect("mkdir");
        let path = example_copy(&sub, wal);
        let mut child = std::process::Command::new(&exe)
            .args([
                "store::torn::kill_loop_child",
                "--exact",
                "--ignored",
                "--test-threads=1",
                "--quiet",
            ])
            .env(CHILD_ENV, &path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn the child");
        std::thread::sleep(Duration::from_micros(20_000 + times.below(120_000)));
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        let left: Vec<&str> = ["-journal", "-wal"]
            .into_iter()
            .filter(|s| PathBuf::from(format!("{}{s}", path.display())).exists())
            .collect();
        recovered += u32::from(!left.is_empty());
        let (state, integrity) = match Store::open(&path) {
            Ok(store) => state_of(&store),
            Err(e) => (format!("not opened: {e}"), String::new()),
        };
        assert_eq!(integrity, "ok", "kill {kill} (left {left:?}): {state}");
        assert!(
            states.contains(&state),
            "kill {kill} (left {left:?}): {state} is none of {states:?}"
        );
        std::fs::remove_dir_all(&sub).expect("rm");
    }
    recovered
}

/// The loop's count: `TORN_KILLS` (default 4, the slice of `make test`).
fn kills() -> u32 {
    std::env::var("TORN_KILLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(4)
}

#[test]
fn a_killed_edit_of_our_files_reads_before_or_after() {
    let kills = kills();
    let recovered = kill_loop(kills, false);
    eprintln!("rollback-journal mode: {kills} kills, {recovered} left a journal, all read whole");
}

#[test]
fn a_killed_edit_of_msprobes_files_reads_before_or_after() {
    let kills = kills();
    let recovered = kill_loop(kills, true);
    eprintln!("WAL mode: {kills} kills, {recovered} left a log, all read whole");
}

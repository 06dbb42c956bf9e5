//! The channel battery (tests/fixtures/channels/battery.py, driven by
//! scripts/channel_battery.py): a task whose test and bench, run as the sandbox user, leave
//! state through every channel they have (files, folder names, extended attributes, mode
//! and times in every writable place; System V IPC objects of every kind, one handed to
//! root; POSIX queues; a daemon, a zombie leader and the socket it holds; TCP connections
//! left in TIME_WAIT; a forged bytecode cache; the keyring; the shell's start-up files) and
//! look for what an earlier run left. Three channels carry information rather than files
//! (which pages of an image file are cached, how fast names are looked up, which holes of a
//! sparse file the install left in /tmp got a page): each run leaves 32 bits keyed to its
//! seed and container and reads the bits for its own key, so an earlier run helps only if it
//! was asked the same question. Before issue 41 the repetitions of one exec shared a seed
//! and the tmpfs lay under every run: those three carried.
//! Every timed run starts in a sandbox of its own, so no run may see anything: base, human
//! and the sample all pass. On the design before the sandboxes (7b25252; channel by channel
//! with `python3 scripts/channel_battery.py`, validation/2026-11-26-channels-*.json), five
//! channels carried (folder names, nested folders, a folder's modification time, an IPC
//! segment handed to root, TCP connections in TIME_WAIT) and three more were caught only
//! after the fact, failing the run (xattrs, mode, mtime of a file the install left).

use std::process::Command;

use crate::common::*;

#[test]
fn no_timed_run_sees_what_an_earlier_run_left() {
    if !docker_available("no_timed_run_sees_what_an_earlier_run_left") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("battery.json");
    let out = run(Command::new("python3")
        .arg(repo_root().join("scripts/channel_battery.py"))
        .arg("--harness")
        .arg(env!("CARGO_BIN_EXE_harness"))
        .arg("--keep")
        .arg(tmp.path().join("work"))
        .arg("--json")
        .arg(&json)
        .arg("--combined"));
    assert!(out.status.success());
    let rows = read_json(&json);
    let row = &rows[0];
    assert_eq!(row["outcome"], "closed", "{row}");
    assert_eq!(row["status"], "passed", "{row}");
    // The battery did plant: only what is refused to the sandbox user before any run was
    // not made (the keyring, by Docker's seccomp profile; a cache in root's cache folder).
    let blocked: Vec<&str> = row["blocked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_str().unwrap())
        .collect();
    assert!(
        blocked
            .iter()
            .all(|b| ["keyring", "bytecode-cache"].contains(b)),
        "channels the battery could not plant: {blocked:?}"
    );
    let bench = read_json(
        &tmp.path()
            .join("work/out/battery/battery/ch-all/0/bench.json"),
    );
    let runs = bench["runs"].as_array().unwrap();
    let timed = runs.iter().filter(|r| r["warmup"] == false).count();
    assert!(timed >= 6, "{bench}");
    for r in runs {
        assert_eq!(r["exit_code"], 0, "{r}");
        if r["warmup"] == false {
            // Three repetitions, each in a sandbox of its own, none stopped early.
            assert_eq!(r["reps"].as_array().map_or(0, Vec::len), 3, "{r}");
        }
    }
}

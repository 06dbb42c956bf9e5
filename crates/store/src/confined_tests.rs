use super::*;
use std::os::unix::fs::symlink;

/// A run folder beside a folder outside it holding one file, `outside/keep`.
struct Fixture {
    _tmp: tempfile::TempDir,
    run: PathBuf,
    outside: PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("keep"), "mine").unwrap();
    Fixture {
        _tmp: tmp,
        run,
        outside,
    }
}

/// What `outside` holds, name and text, to show nothing there changed.
fn listing(dir: &Path) -> Vec<(String, String)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let text = std::fs::read_to_string(&p).unwrap_or_else(|_| "<folder>".into());
            (p.file_name().unwrap().to_string_lossy().into_owned(), text)
        })
        .collect();
    out.sort();
    out
}

fn assert_link_refused(e: anyhow::Error, link: &Path) {
    let e = format!("{e:#}");
    assert!(
        e.contains(&format!("{}: is a symbolic link", link.display())),
        "{e}"
    );
}

#[test]
fn writes_make_folders_replace_whole_and_leave_no_temp_file() {
    let f = fixture();
    let store = Confined::folder(&f.run);
    let p = f.run.join("m/t/0/report.json");
    store.write_atomic(&p, b"one").unwrap();
    store.write_atomic(&p, b"two").unwrap();
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "two");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&p).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o644);
    assert_eq!(
        std::fs::read_dir(f.run.join("m/t/0")).unwrap().count(),
        1,
        "only the file, no temp file left"
    );
    store.create_dir_all(&f.run.join("rollouts/a")).unwrap();
    assert!(f.run.join("rollouts/a").is_dir());
    // A relative root works as well as an absolute one.
    let rel = Confined::folder(Path::new("."));
    assert!(rel.check(Path::new("./no/such/file")).is_ok());
}

#[test]
fn a_linked_folder_on_the_way_is_refused_and_nothing_lands_outside() {
    let f = fixture();
    symlink(&f.outside, f.run.join("rollouts")).unwrap();
    symlink(&f.outside, f.run.join("model")).unwrap();
    let store = Confined::folder(&f.run);
    let before = listing(&f.outside);
    for path in [
        f.run.join("rollouts/r.report.json"),
        f.run.join("model/t/0/report.json"),
        f.run.join("model/keep"),
    ] {
        let e = store.write_atomic(&path, b"x").unwrap_err();
        let link = if path.starts_with(f.run.join("rollouts")) {
            f.run.join("rollouts")
        } else {
            f.run.join("model")
        };
        assert_link_refused(e, &link);
    }
    assert_link_refused(
        store.create_dir_all(&f.run.join("model/t")).unwrap_err(),
        &f.run.join("model"),
    );
    assert_link_refused(
        store.check(&f.run.join("model/t/0")).unwrap_err(),
        &f.run.join("model"),
    );
    assert_link_refused(
        store.entries(&f.run.join("rollouts")).unwrap_err(),
        &f.run.join("rollouts"),
    );
    assert_link_refused(
        store.remove(&f.run.join("rollouts/keep")).unwrap_err(),
        &f.run.join("rollouts"),
    );
    assert_eq!(listing(&f.outside), before, "nothing outside changed");
}

#[test]
fn a_link_in_the_place_of_the_file_is_refused_not_replaced() {
    let f = fixture();
    std::fs::create_dir_all(f.run.join("m")).unwrap();
    symlink(f.outside.join("keep"), f.run.join("m/report.json")).unwrap();
    let store = Confined::folder(&f.run);
    let path = f.run.join("m/report.json");
    assert_link_refused(store.write_atomic(&path, b"x").unwrap_err(), &path);
    assert_link_refused(store.check(&path).unwrap_err(), &path);
    assert_eq!(
        std::fs::read_to_string(f.outside.join("keep")).unwrap(),
        "mine"
    );
    assert!(
        std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // A missing file, or missing folders on the way, are fine to check.
    store.check(&f.run.join("m/new/0/report.json")).unwrap();
    store.check(&f.run.join("m")).unwrap();
}

#[test]
fn a_run_folder_that_is_a_link_is_refused_a_results_folder_may_be_one() {
    let f = fixture();
    let linked = f.run.join("linked-run");
    symlink(&f.outside, &linked).unwrap();
    let e = Confined::folder(&linked)
        .write_atomic(&linked.join("run.json"), b"{}")
        .unwrap_err();
    assert_link_refused(e, &linked);
    assert!(!f.outside.join("run.json").exists());
    // The results folder the user named may live elsewhere; what is under it may not.
    let results = Confined::beneath(&linked);
    results
        .write_atomic(&linked.join("index.html"), b"<p>")
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(f.outside.join("index.html")).unwrap(),
        "<p>"
    );
    symlink(&f.run, f.outside.join("run-link")).unwrap();
    assert_link_refused(
        results
            .create_dir_all(&linked.join("run-link/x"))
            .unwrap_err(),
        &linked.join("run-link"),
    );
    assert!(!f.run.join("x").exists());
}

#[test]
fn removal_takes_links_themselves_never_what_they_point_at() {
    let f = fixture();
    let store = Confined::folder(&f.run);
    let old = f.run.join("rollouts/old");
    store.write_atomic(&old.join("a.json"), b"{}").unwrap();
    symlink(&f.outside, old.join("away")).unwrap();
    symlink(f.outside.join("keep"), f.run.join("rollouts/file-link")).unwrap();
    let mut listed = store.entries(&f.run.join("rollouts")).unwrap();
    listed.sort();
    assert_eq!(
        listed,
        vec![f.run.join("rollouts/file-link"), f.run.join("rollouts/old")]
    );
    for p in &listed {
        store.remove(p).unwrap();
    }
    assert_eq!(
        std::fs::read_dir(f.run.join("rollouts")).unwrap().count(),
        0
    );
    assert_eq!(
        listing(&f.outside),
        vec![("keep".to_string(), "mine".to_string())]
    );
    // Missing: nothing to do, nothing to list.
    store.remove(&f.run.join("rollouts/none")).unwrap();
    assert!(store.entries(&f.run.join("none")).unwrap().is_empty());
}

#[test]
fn paths_outside_the_folder_or_climbing_out_are_refused() {
    let f = fixture();
    let store = Confined::folder(&f.run);
    for path in [
        f.outside.join("x"),
        f.run.join("../outside/x"),
        f.run.join("a/../../outside/x"),
    ] {
        let e = format!("{:#}", store.write_atomic(&path, b"x").unwrap_err());
        assert!(e.contains(&path.display().to_string()), "{e}");
        assert!(e.contains("not inside") || e.contains("leaves"), "{e}");
    }
    assert!(store.write_atomic(&f.run, b"x").is_err());
    assert_eq!(
        listing(&f.outside),
        vec![("keep".to_string(), "mine".to_string())]
    );
}

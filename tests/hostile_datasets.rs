//! The hostile catalogue's dataset part (tasks/_predictions/HOSTILE.md, "Datasets written
//! to attack the host"): task folders made by the test, each written the way a dataset's
//! author could to run a command, write a file or read a secret on the machine that loads
//! it; the real binary lists them (`harness tasks`, which every command's loading shares) and
//! imports a GSO row. Each gets the outcome the table gives it, and no marker file appears.

use std::path::Path;
use std::process::Command;

use crate::common::*;

/// The table of HOSTILE.md under its `| dataset task` header: (task, expected).
fn expected() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(repo_root().join("tasks/_predictions/HOSTILE.md")).unwrap();
    text.lines()
        .skip_while(|l| !l.starts_with("| dataset task"))
        .skip(2)
        .take_while(|l| l.starts_with("| "))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            assert_eq!(cells.len(), 3, "HOSTILE.md dataset row {l:?}");
            (
                cells[0].trim_matches('`').to_string(),
                cells[2].trim_matches('`').to_string(),
            )
        })
        .collect()
}

fn sh(dir: &Path, script: &str) {
    let st = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(st.success(), "{script}");
}

const TAIL: &str = "[test]\ncommand = \"true\"\n[[bench]]\nname = \"b\"\ncommand = \"true\"\n";
const COMMIT: &str = "git -c user.name=t -c user.email=t@t commit -qm";

/// A git repository in `dir/repo` with tags `base` and `opt`.
fn repo(dir: &Path) {
    std::fs::create_dir_all(dir.join("repo")).unwrap();
    sh(
        &dir.join("repo"),
        &format!(
            "git init -q . && echo a > m.py && git add -A && {COMMIT} base && git tag base && \
             echo b > m.py && {COMMIT} opt -a && git tag opt"
        ),
    );
}

fn git_task(dir: &Path, source: &str, base: &str) {
    write(
        &dir.join("task.toml"),
        &format!("[source]\n{source}\nbase_commit = \"{base}\"\n[human]\ncommit = \"opt\"\n{TAIL}"),
    );
}

fn folder_task(dir: &Path, extra: &str, patch: &str) {
    write(&dir.join("repo/m.py"), "a\n");
    write(
        &dir.join("human.patch"),
        "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-a\n+b\n",
    );
    write(
        &dir.join("task.toml"),
        &format!("{extra}\n[source]\npath = \"repo\"\n[human]\npatch = \"{patch}\"\n{TAIL}"),
    );
}

/// Makes the task `name` in `ds`; `marker` is a path only an attack would create.
fn make(ds: &Path, name: &str, marker: &Path) {
    let dir = ds.join(name);
    let m = marker.display();
    match name {
        "git-filters" => {
            repo(&dir);
            let git = dir.join("repo/.git");
            let mut config = std::fs::read_to_string(git.join("config")).unwrap();
            config.push_str(&format!(
                "[filter \"x\"]\n\tsmudge = \"touch {m}; cat\"\n[diff \"x\"]\n\ttextconv = \"touch {m}; cat\"\n[core]\n\tfsmonitor = \"touch {m}; true\"\n"
            ));
            std::fs::write(git.join("config"), config).unwrap();
            std::fs::write(git.join("info/attributes"), "* filter=x diff=x\n").unwrap();
            git_task(&dir, "git = \"repo\"", "base");
        }
        "symlink-tree" => {
            std::fs::create_dir_all(dir.join("src")).unwrap();
            sh(
                &dir.join("src"),
                &format!(
                    "git init -q . && b=$(echo pwned | git hash-object -w --stdin) && \
                     l=$(printf %s '{}' | git hash-object -w --stdin) && \
                     s=$(printf '100644 blob %s\\tx\\n' $b | git mktree) && \
                     t=$(printf '120000 blob %s\\ta\\n040000 tree %s\\ta\\n' $l $s | git mktree) && \
                     c=$(git -c user.name=t -c user.email=t@t commit-tree -m base $t) && \
                     git tag base $c && git tag opt $c && \
                     git bundle create ../repo.bundle base opt 2>/dev/null && rm -rf .git",
                    marker.parent().unwrap().display()
                ),
            );
            std::fs::remove_dir_all(dir.join("src")).unwrap();
            git_task(&dir, "git = \"repo.bundle\"", "base");
        }
        "reads-environ" => folder_task(
            &dir,
            "[image.files]\n\"/opt/leak/environ\" = \"/proc/self/environ\"",
            "human.patch",
        ),
        "patch-links-out" => {
            folder_task(&dir, "", "stolen.patch");
            std::os::unix::fs::symlink("/etc/hostname", dir.join("stolen.patch")).unwrap();
        }
        "revision-option" => {
            repo(&dir);
            git_task(&dir, "git = \"repo\"", &format!("--output={m}"));
        }
        "escapes-in-text" => folder_task(
            &dir,
            "description = \"\\u001b[2J\\u001b[1A\\rgit-filters  base  opt  0  fake line\"",
            "human.patch",
        ),
        "patch-writes-git-config" => {
            // git apply refuses `.git/config`; `patch` (the fallback) writes it, and the
            // tree's .gitattributes names the filter it would define.
            write(&dir.join("repo/m.py"), "a\n");
            write(&dir.join("repo/.gitattributes"), "* filter=x\n");
            write(
                &dir.join("human.patch"),
                &format!(
                    "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-a\n+b\n--- /dev/null\n+++ b/.git/config\n@@ -0,0 +1,2 @@\n+[filter \"x\"]\n+\tclean = \"touch {m}; cat\"\n"
                ),
            );
            write(
                &dir.join("task.toml"),
                &format!("[source]\npath = \"repo\"\n[human]\npatch = \"human.patch\"\n{TAIL}"),
            );
        }
        "gitdir-bundle" => {
            let victim = marker.parent().unwrap().with_file_name("victim");
            write(
                &dir.join("repo.bundle"),
                &format!("gitdir: {}/.git\n", victim.display()),
            );
            git_task(&dir, "git = \"repo.bundle\"", "HEAD");
        }
        "objects-link" => {
            let victim = marker.parent().unwrap().with_file_name("victim");
            std::fs::create_dir_all(dir.join("repo")).unwrap();
            std::fs::copy(victim.join(".git/HEAD"), dir.join("repo/HEAD")).unwrap();
            for top in ["objects", "refs"] {
                std::os::unix::fs::symlink(
                    victim.join(".git").join(top),
                    dir.join("repo").join(top),
                )
                .unwrap();
            }
            git_task(&dir, "git = \"repo\"", "HEAD");
        }
        "unresolvable-path" => {
            // Two links, each 14 folders of 250 characters down: the kernel opens
            // s1/s2/../../.. but no real path can name it (past PATH_MAX).
            std::fs::create_dir_all(&dir).unwrap();
            let name = "a".repeat(250);
            let chain = vec![name.as_str(); 14].join("/");
            std::fs::create_dir_all(dir.join(&chain)).unwrap();
            std::os::unix::fs::symlink(&chain, dir.join("s1")).unwrap();
            // The second chain below the first: made relative to it (the whole path is past
            // PATH_MAX).
            sh(
                &dir.join(&chain),
                &format!("mkdir -p {chain} && ln -s {chain} s2"),
            );
            let up = "../".repeat(28 + dir.components().count());
            folder_task(
                &dir,
                &format!("[image.files]\n\"/x\" = \"s1/s2/{up}etc/hostname\""),
                "human.patch",
            );
        }
        "toml-link" => {
            std::fs::create_dir_all(&dir).unwrap();
            let secret = marker.parent().unwrap().with_file_name("secret.txt");
            std::fs::write(&secret, "TOKEN=hunter2-not-a-task\n").unwrap();
            std::os::unix::fs::symlink(&secret, dir.join("task.toml")).unwrap();
        }
        "image-newline" => folder_task(
            &dir,
            "[image]\nbase = \"harness-base:bookworm\\nRUN touch /x\"",
            "human.patch",
        ),
        "url-helper" => git_task(&dir, &format!("url = \"ext::sh -c touch% {m}\""), "base"),
        "huge-tree" => {
            zeros_bundle(&dir.join("up"), &[(17, "base", "opt")]);
            std::fs::remove_dir_all(dir.join("up")).unwrap();
            git_task(&dir, "git = \"src.bundle\"", "base");
        }
        // Port 9 (discard) of this machine: nothing may even try it.
        "ssh-source" => git_task(&dir, "url = \"ssh://127.0.0.1:9/x.git\"", "base"),
        other => panic!("HOSTILE.md names a dataset task this test cannot make: {other}"),
    }
}

#[test]
fn datasets_written_to_attack_the_host_get_their_designed_outcomes() {
    let work = tempfile::tempdir().unwrap();
    let ds = work.path().join("ds");
    let marker_dir = work.path().join("markers");
    std::fs::create_dir_all(&marker_dir).unwrap();
    let rows = expected();
    assert!(rows.len() >= 6, "HOSTILE.md lists the dataset part");
    // A repository of the host's that some tasks try to read as their own.
    let victim = work.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    sh(
        &victim,
        &format!("git init -q . && echo private > v.txt && git add -A && {COMMIT} victim"),
    );
    for (name, _) in &rows {
        make(&ds, name, &marker_dir.join(name));
    }
    let out = run(harness()
        .args(["tasks", "--dataset"])
        .arg(&ds)
        .arg("--results-dir")
        .arg(work.path().join("results")));
    let listing = String::from_utf8_lossy(&out.stdout);
    let mut problems = Vec::new();
    for (name, want) in &rows {
        let line = listing
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")) || l.contains(&format!(" {name}: ")))
            .unwrap_or("");
        // Refused at load ("invalid task NAME: ...") or when its source is read ("cannot
        // list: NAME: ...").
        let ok = if want == "listed" {
            line.starts_with(&format!("{name} "))
        } else {
            (line.starts_with(&format!("invalid task {name}: "))
                || line.starts_with(&format!("cannot list: {name}: ")))
                && line.contains(want.as_str())
        };
        if !ok {
            problems.push(format!("{name}: want {want:?}; got {line:?}"));
        }
    }
    assert!(
        !listing.contains('\u{1b}') && !listing.contains('\r'),
        "a dataset's text reached the terminal raw: {listing:?}"
    );
    assert!(
        !listing.contains("hunter2"),
        "a host file's text was shown: {listing}"
    );

    let markers: Vec<_> = std::fs::read_dir(&marker_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        markers.is_empty(),
        "the dataset ran or wrote on the host: {markers:?}"
    );
    assert!(
        problems.is_empty(),
        "{}\n\nlisting:\n{listing}",
        problems.join("\n")
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "invalid tasks make `tasks` exit 1"
    );
}

/// A GSO row whose `repo` holds a newline and TOML: the imported task has only the keys
/// the importer means (on 7b25252 it gained `[measure]` settings).
#[test]
fn a_gso_row_cannot_write_task_keys() {
    let work = tempfile::tempdir().unwrap();
    let rows = work.path().join("rows.jsonl");
    let row = serde_json::json!({
        "instance_id": "O__R-1", "repo": "o/r).\n[measure]\nreplicas = 9\n#", "api": "f",
        "tests": ["print(1)"], "install_commands": [], "gt_commit_message": "x",
        "gt_diff": "diff --git a/x b/x\n", "arch": "x86_64", "instance_image_tag": "latest"
    });
    std::fs::write(&rows, format!("{row}\n")).unwrap();
    let out = run(harness()
        .args(["tasks", "import-gso"])
        .arg(&rows)
        .arg("--out")
        .arg(work.path().join("ds")));
    assert_eq!(out.status.code(), Some(0));
    let text = std::fs::read_to_string(work.path().join("ds/O__R-1/task.toml")).unwrap();
    let doc: toml::Table = toml::from_str(&text).unwrap();
    assert!(!doc.contains_key("measure"), "{text}");
    let keys: Vec<&String> = doc.keys().collect();
    assert_eq!(
        keys,
        [
            "bench",
            "description",
            "env",
            "human",
            "image",
            "install",
            "instance_id",
            "resources",
            "source",
            "test"
        ]
    );
}

/// Runs `cmd` to its end with its output in files: (exit code, stdout, stderr, the most
/// memory it or any process it waited for held, in bytes). The figure is `ru_maxrss` of the
/// children of a small python3 that starts it: a child's `ru_maxrss` starts at its parent's
/// peak (the kernel carries the parent's mm into it at exec), so measured from this test
/// process, which holds every test's memory, it would say more than the command held.
fn run_measured(cmd: &Command) -> (Option<i32>, String, String, u64) {
    let dir = tempfile::tempdir().unwrap();
    let (out, err, rss) = (
        dir.path().join("out"),
        dir.path().join("err"),
        dir.path().join("rss"),
    );
    let mut measured = Command::new("python3");
    measured
        .args([
            "-c",
            "import resource, subprocess, sys\n\
             code = subprocess.call(sys.argv[2:])\n\
             open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n\
             sys.exit(code)",
        ])
        .arg(&rss)
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .envs(
            cmd.get_envs()
                .filter_map(|(k, v)| v.map(|v| (k.to_os_string(), v.to_os_string()))),
        )
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap());
    if let Some(d) = cmd.get_current_dir() {
        measured.current_dir(d);
    }
    let status = measured
        .status()
        .expect("python3 (it measures the command)");
    let (stdout, stderr) = (
        std::fs::read_to_string(&out).unwrap(),
        std::fs::read_to_string(&err).unwrap(),
    );
    eprintln!(
        "--- {cmd:?} exited {:?}\n--- stdout:\n{stdout}\n--- stderr:\n{stderr}",
        status.code()
    );
    let kib: u64 = std::fs::read_to_string(&rss)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (status.code(), stdout, stderr, kib * 1024)
}

/// A repository at `up` and its bundle `../src.bundle`: for each `(n, base, human)`, a
/// commit tagged `base` whose tree holds `m.py` (`a`) and one 64 MiB blob of zeros `n`
/// times, and a commit tagged `human` on it with `m.py` `b`. The bundle is about 100 KiB.
fn zeros_bundle(up: &Path, commits: &[(usize, &str, &str)]) {
    std::fs::create_dir_all(up).unwrap();
    sh(up, "git init -q . && head -c 67108864 /dev/zero > zeros");
    // git with `input` on stdin; its output, trimmed.
    let git = |args: &[&str], input: &str| -> String {
        let mut child = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(up)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        std::io::Write::write_all(&mut stdin, input.as_bytes()).unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "git {args:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let zeros = git(&["hash-object", "-w", "zeros"], "");
    // A tree of m.py (`m`) and the blob of zeros `n` times.
    let tree = |m: &str, n: usize| {
        let blob = git(&["hash-object", "-w", "--stdin"], &format!("{m}\n"));
        let mut listing = format!("100644 blob {blob}\tm.py\n");
        for i in 0..n {
            listing.push_str(&format!("100644 blob {zeros}\tz{i:02}\n"));
        }
        git(&["mktree"], &listing)
    };
    let mut tags = vec!["bundle", "create", "../src.bundle"];
    for (n, base, human) in commits {
        let b = git(&["commit-tree", "-m", base, &tree("a", *n)], "");
        let h = git(&["commit-tree", "-m", human, "-p", &b, &tree("b", *n)], "");
        git(&["tag", base, &b], "");
        git(&["tag", human, &h], "");
        tags.extend([*base, *human]);
    }
    git(&tags, "");
}

/// Issue 40: a dataset's repository is small on disk and huge once read: a bundle of about
/// 100 KiB whose base tree holds one 64 MiB blob of zeros 12 times (768 MiB), and 17 times
/// at another commit (1.06 GiB, over the 1 GiB a source may hold). `harness tasks` reads the
/// first through (a human commit: checked and dropped; a human patch: its reproducible
/// commits made from the tree streamed to disk) and refuses the second by the sizes the
/// archive states, in memory bounded by neither (on 37adbf2 a 1 GiB tree took 3.0 GiB).
#[test]
fn a_small_bundle_is_read_in_bounded_memory_or_refused() {
    let work = tempfile::tempdir().unwrap();
    zeros_bundle(
        &work.path().join("up"),
        &[(12, "base", "opt"), (17, "big", "bigopt")],
    );
    let bundle = work.path().join("src.bundle");
    let bundle_size = std::fs::metadata(&bundle).unwrap().len();
    assert!(bundle_size < 1 << 20, "a small bundle: {bundle_size} bytes");
    let ds = work.path().join("ds");
    for (id, base, human) in [
        ("stream-commit", "base", "[human]\ncommit = \"opt\""),
        ("stream-patch", "base", "[human]\npatch = \"human.patch\""),
        ("over-limit", "big", "[human]\ncommit = \"bigopt\""),
    ] {
        let dir = ds.join(id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(&bundle, dir.join("src.bundle")).unwrap();
        write(
            &dir.join("human.patch"),
            "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-a\n+b\n",
        );
        write(
            &dir.join("task.toml"),
            &format!("[source]\ngit = \"src.bundle\"\nbase_commit = \"{base}\"\n{human}\n{TAIL}"),
        );
    }
    let (code, listing, _, max_rss) = run_measured(
        harness()
            .args(["tasks", "--dataset"])
            .arg(&ds)
            .arg("--results-dir")
            .arg(work.path().join("results")),
    );
    assert_eq!(code, Some(0));
    let line = |id: &str| {
        listing
            .lines()
            .find(|l| l.starts_with(&format!("{id} ")) || l.contains(&format!(" {id}: ")))
            .unwrap_or("")
            .to_string()
    };
    assert!(
        line("stream-commit")
            .split_whitespace()
            .take(3)
            .eq(["stream-commit", "base", "opt"]),
        "{listing}"
    );
    let patch_row: Vec<String> = line("stream-patch")
        .split_whitespace()
        .map(str::to_string)
        .collect();
    assert!(
        patch_row.len() >= 3 && patch_row[1] == "base" && patch_row[2].len() == 12,
        "a reproducible human commit: {listing}"
    );
    assert!(
        line("over-limit").starts_with("cannot list: over-limit: ")
            && line("over-limit").contains("more than 1024 MiB of files"),
        "{listing}"
    );
    // 768 MiB of tree read twice, and 1 GiB before the refusal: held, any of them would be
    // three times this.
    let tree = 12 * (64u64 << 20);
    eprintln!("max RSS of `harness tasks`: {} MiB", max_rss >> 20);
    assert!(
        max_rss < tree / 3,
        "`harness tasks` (and the git it ran) held {} MiB at once",
        max_rss >> 20
    );
}

/// Issue 40: a dataset's remote source (ssh://, git://, http:// to a listener of this
/// test's) is fetched only by the commands that build or evaluate it: `harness tasks` lists
/// a task whose task.toml names both commits, says the others are not fetched, and no
/// connection reaches the listener (on 37adbf2 the host's ssh connected where the dataset
/// said, with the user's ssh configuration, on every command).
#[test]
fn a_remote_source_is_never_fetched_by_tasks() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let work = tempfile::tempdir().unwrap();
    let ds = work.path().join("ds");
    for (id, url, human) in [
        (
            "ssh-commit",
            "ssh://127.0.0.1:{port}/x.git",
            "[human]\ncommit = \"opt\"",
        ),
        (
            "ssh-patch",
            "ssh://127.0.0.1:{port}/x.git",
            "[human]\npatch = \"human.patch\"",
        ),
        (
            "git-patch",
            "git://127.0.0.1:{port}/x.git",
            "[human]\npatch = \"human.patch\"",
        ),
        (
            "http-patch",
            "http://127.0.0.1:{port}/x.git",
            "[human]\npatch = \"human.patch\"",
        ),
    ] {
        let url = url.replace("{port}", &port.to_string());
        let dir = ds.join(id);
        write(
            &dir.join("human.patch"),
            "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-a\n+b\n",
        );
        write(
            &dir.join("task.toml"),
            &format!("[source]\nurl = \"{url}\"\nbase_commit = \"base\"\n{human}\n{TAIL}"),
        );
    }
    let results = work.path().join("results");
    let o = run(harness()
        .args(["tasks", "--dataset"])
        .arg(&ds)
        .arg("--results-dir")
        .arg(&results));
    assert_eq!(o.status.code(), Some(0));
    let listing = String::from_utf8_lossy(&o.stdout);
    assert!(
        listing.lines().any(|l| l
            .split_whitespace()
            .take(3)
            .eq(["ssh-commit", "base", "opt"])),
        "{listing}"
    );
    for id in ["ssh-patch", "git-patch", "http-patch"] {
        assert!(
            listing
                .lines()
                .any(|l| l.starts_with(&format!("not fetched: {id}: "))
                    && l.contains("`harness build`")),
            "{id}: {listing}"
        );
    }
    let o = run(harness()
        .args(["tasks", "--json", "--dataset"])
        .arg(&ds)
        .arg("--results-dir")
        .arg(&results));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["tasks"][0]["instance_id"], "ssh-commit", "{json}");
    assert_eq!(
        json["not_fetched"].as_array().map(Vec::len),
        Some(3),
        "{json}"
    );
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Ok((_, peer)) => panic!("`harness tasks` connected to the dataset's address from {peer}"),
        Err(e) => panic!("accept: {e}"),
    }
}

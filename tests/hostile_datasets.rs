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

//! What a first user hits (issue 31): each papercut with the test that failed before it was
//! fixed. None of these needs Docker; where a command must stop before the engine, the
//! engine's address points nowhere, so reaching it would show in the error.

use crate::common::*;

/// The harness with a Docker address that answers nothing.
fn offline() -> std::process::Command {
    let mut c = harness();
    c.env("DOCKER_HOST", "unix:///nonexistent/docker.sock");
    c
}

#[test]
fn predictions_that_name_no_instance_of_the_dataset_stop_before_the_engine() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("tasks");
    make_task(&ds, "fine", SLOW, FAST, "");
    let preds = tmp.path().join("p.jsonl");
    predictions(&preds, &[("no-such-task", Some("diff --git a/x b/x\n"))]);
    let results = tmp.path().join("out");
    let out = run(offline()
        .args([
            "opt-at-k",
            "--model",
            "test-model",
            "--k",
            "1",
            "--run-id",
            "r",
        ])
        .arg("--predictions")
        .arg(&preds)
        .arg("--dataset")
        .arg(&ds)
        .arg("--results-dir")
        .arg(&results));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no prediction names a selected instance of dataset")
            && err.contains("\"no-such-task\" (")
            && err.contains("p.jsonl:1)"),
        "{err}"
    );
    assert!(!err.contains("nonexistent"), "the engine was asked: {err}");
    assert!(!results.join("r").exists(), "nothing is written");
}

#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    // The reader exits at once; the harness starts writing after it has gone.
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("exec 3>&1; { sleep 0.5; \"$0\" tasks --dataset tasks; echo \"rc=$?\" >&3; } | true")
        .arg(env!("CARGO_BIN_EXE_harness"))
        .current_dir(repo_root())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(stdout.contains("rc=0"), "{stdout} {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn output_that_cannot_be_written_fails_the_command() {
    // A full disk is not a reader that left: what was printed is cut off, and the exit says so.
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = harness()
        .args(["tasks", "--json"])
        .stdout(full)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("standard output") && err.contains("cut off"),
        "{err}"
    );
}

#[test]
fn the_version_names_the_commit_the_build_records() {
    let out = run(harness().arg("--version"));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.starts_with(&format!("harness {} (", env!("CARGO_PKG_VERSION"))) && said.contains(')'),
        "{said}"
    );
    let commit = said
        .split('(')
        .nth(1)
        .unwrap_or("")
        .trim_end()
        .trim_end_matches(')');
    assert!(
        commit == "unknown" || commit.len() >= 12,
        "{said}: the commit run.json records"
    );
}

#[test]
fn usage_errors_say_what_was_meant() {
    let out = run(harness().args(["run", "--model", "o3"]));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("did you mean `harness opt-at-k --model") && !err.contains("'-- --model'"),
        "{err}"
    );
    // A negative number is a value, judged as one.
    let out = run(harness()
        .args([
            "opt-at-k",
            "--model",
            "demo-agent",
            "--k",
            "1",
            "--min-speedup",
            "-1",
        ])
        .args(["--predictions", "tasks/_predictions/demo-agent.jsonl"]));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--min-speedup: -1 is not a positive number"),
        "{err}"
    );
    // import-gso's help names every format it reads.
    let out = run(harness().args(["tasks", "import-gso", "--help"]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Parquet"));
}

#[test]
fn doctor_offers_only_docker_hosts_this_build_can_reach() {
    let out = run(harness()
        .env("DOCKER_HOST", "ssh://user@host")
        .arg("doctor"));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("ssh -nNT -L"), "{said}");
    assert!(
        !said.contains("ssh://user@host)"),
        "offered as a form it takes: {said}"
    );
}

/// Every file under `dir` with one of `exts`, recursively.
fn files_under(dir: &std::path::Path, exts: &[&str]) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| exts.iter().any(|e| x == *e)) {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn every_dependency_is_used() {
    // Each crate of the workspace, by its own manifest and its own code.
    let crates = [
        ("Cargo.toml", "src", "build.rs"),
        ("crates/telemetry/Cargo.toml", "crates/telemetry/src", ""),
        ("crates/core/Cargo.toml", "crates/core/src", ""),
        ("crates/store/Cargo.toml", "crates/store/src", ""),
        (
            "crates/sandbox/Cargo.toml",
            "crates/sandbox/src",
            "crates/sandbox/build.rs",
        ),
    ];
    let mut unused = Vec::new();
    for (manifest, src, build) in crates {
        let text = std::fs::read_to_string(repo_root().join(manifest)).unwrap();
        let manifest_toml: toml::Table = toml::from_str(&text).unwrap();
        let code: String = files_under(&repo_root().join(src), &["rs"])
            .into_iter()
            .chain([repo_root().join(build)])
            .map(|p| std::fs::read_to_string(p).unwrap_or_default())
            .collect();
        let Some(deps) = manifest_toml.get("dependencies").and_then(|d| d.as_table()) else {
            continue;
        };
        for name in deps.keys() {
            let ident = name.replace('-', "_");
            let used = [
                format!("{ident}::"),
                format!("{ident}!"),
                format!("use {ident} as "),
            ]
            .iter()
            .any(|s| code.contains(s.as_str()));
            if !used {
                unused.push(format!("{manifest}: {name}"));
            }
        }
    }
    assert!(unused.is_empty(), "dependencies nothing uses: {unused:?}");
}

#[test]
fn no_build_output_is_tracked_and_every_cited_document_exists() {
    let out = std::process::Command::new("git")
        .args(["ls-files"])
        .current_dir(repo_root())
        .output()
        .unwrap();
    let tracked = String::from_utf8_lossy(&out.stdout);
    let built: Vec<&str> = tracked
        .lines()
        .filter(|f| f.ends_with(".pyc") || f.contains("__pycache__/"))
        .collect();
    assert!(built.is_empty(), "{built:?}");
    // A comment that sends the reader to a document names one the repository has.
    let cited = regex::Regex::new(r"\b([A-Z][A-Za-z_]*\.md|docs/[a-z0-9/_-]+\.md)\b").unwrap();
    let mut missing = Vec::new();
    for file in files_under(&repo_root().join("src"), &["rs"]) {
        let text = std::fs::read_to_string(&file).unwrap();
        let comments = text.lines().filter(|l| l.trim_start().starts_with("//"));
        for m in comments.flat_map(|l| cited.captures_iter(l).collect::<Vec<_>>()) {
            let doc = &m[1];
            if !repo_root().join(doc).exists() && !repo_root().join("docs/src").join(doc).exists() {
                missing.push(format!("{}: {doc}", file.display()));
            }
        }
    }
    assert!(missing.is_empty(), "{missing:#?}");
}

#[test]
fn every_command_that_prints_a_result_takes_json() {
    for command in [
        "opt-at-k",
        "run",
        "build",
        "report",
        "compare",
        "tasks",
        "local",
        "agent run",
        "status",
        "merge",
        "doctor",
        "images gc",
        "gpu probe",
    ] {
        let out = run(harness().args(command.split(' ')).arg("--help"));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("--json"),
            "harness {command} has no --json"
        );
    }
    let out = run(harness().args(["tasks", "--json"]));
    assert_eq!(out.status.code(), Some(0));
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<&str> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["instance_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["dedupe-list", "pair-sum", "primes-sieve", "word-freq"]
    );
    assert_eq!(
        listed["tasks"][0]["human"].as_str().map(str::len),
        Some(40),
        "{listed}"
    );
}

#[test]
fn every_environment_variable_the_harness_reads_is_in_the_table() {
    let table = std::fs::read_to_string(repo_root().join("docs/src/environment.md")).unwrap();
    let read = regex::Regex::new(r#"env::var(?:_os)?\("([A-Z_]+)"\)|env = "([A-Z_]+)""#).unwrap();
    let mut missing = Vec::new();
    for file in files_under(&repo_root().join("src"), &["rs"]) {
        let text = std::fs::read_to_string(&file).unwrap();
        for m in read.captures_iter(&text) {
            let name = m.get(1).or(m.get(2)).unwrap().as_str();
            // Read by the in-container programs or by tests, not by a user of the harness.
            if [
                "HARNESS_CHILD_ENV",
                "HARNESS_NONCE",
                "HARNESS_GIT_COMMIT",
                "HOME",
                "PATH",
            ]
            .contains(&name)
                || name.starts_with("HARNESS_TEST_")
            {
                continue;
            }
            if !table.contains(&format!("`{name}`")) {
                missing.push(format!("{name} ({})", file.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "not in docs/src/environment.md: {missing:?}"
    );
}

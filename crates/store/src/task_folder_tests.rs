//! task.toml's format, read from real task folders.

use std::path::Path;

use anyhow::Result;
use harness_core::task::*;

use crate::task_folder::*;

const GOOD: &str = r#"
description = "demo"
protected = ["bench.py", "tests/**"]
[source]
path = "repo"
[human]
patch = "human.patch"
[test]
command = "python3 test.py"
[[bench]]
name = "b1"
command = "python3 bench.py"
"#;

fn task_dir() -> tempfile::TempDir {
    let d = tempfile::Builder::new().prefix("t").tempdir().unwrap();
    std::fs::create_dir(d.path().join("repo")).unwrap();
    std::fs::write(d.path().join("human.patch"), "").unwrap();
    d
}

fn parse(dir: &Path, text: &str) -> Result<Task> {
    Task::parse(&OnDisk(dir), &dir.join("task.toml"), text)
}

#[test]
fn good_task_gets_defaults() {
    let d = task_dir();
    let t = parse(d.path(), GOOD).unwrap();
    assert_eq!(t.base_image, DEFAULT_BASE_IMAGE);
    assert_eq!(t.benches[0].runs, 5);
    assert_eq!(t.benches[0].warmups, 1);
    assert!(!t.resources.network);
    assert!(t.is_protected("bench.py"));
    assert!(t.is_protected("tests/a/b.py"));
    assert!(!t.is_protected("mod.py"));
}

#[test]
fn missing_field_names_file_and_field() {
    let d = task_dir();
    let text = GOOD.replace("[test]\ncommand = \"python3 test.py\"\n", "");
    let err = parse(d.path(), &text).unwrap_err().to_string();
    assert!(err.contains("task.toml"), "{err}");
    assert!(err.contains("missing field `test`"), "{err}");
}

#[test]
fn unknown_field_is_an_error_with_line() {
    let d = task_dir();
    let text = GOOD.replace("[[bench]]\n", "[[bench]]\nrnus = 3\n");
    let err = parse(d.path(), &text).unwrap_err().to_string();
    assert!(err.contains("rnus"), "{err}");
    assert!(err.contains("line 11"), "{err}");
}

#[test]
fn bad_values_name_the_field() {
    let d = task_dir();
    for (from, to, field) in [
        ("name = \"b1\"", "name = \"b 1\"", "bench[0].name"),
        ("[[bench]]\n", "[[bench]]\nruns = 0\n", "bench[0].runs"),
        ("path = \"repo\"", "path = \"nope\"", "source.path"),
        (
            "patch = \"human.patch\"",
            "patch = \"x.patch\"",
            "human.patch",
        ),
        (
            "patch = \"human.patch\"",
            "commit = \"abc\"",
            "human.commit",
        ),
        (
            "[[bench]]\n",
            "[[bench]]\nmetric = \"output\"\n",
            "bench[0].metric",
        ),
    ] {
        let err = parse(d.path(), &GOOD.replace(from, to))
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("field `{field}`")), "{field}: {err}");
    }
    let err = parse(
        d.path(),
        &format!("{GOOD}\n[resources]\nmemory = \"lots\"\n"),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("resources.memory"), "{err}");
}

#[test]
fn bench_output_is_checked_unless_the_task_says_why_not() {
    let d = task_dir();
    let t = parse(d.path(), GOOD).unwrap();
    assert_eq!(
        t.benches[0].output_check,
        OutputCheck::Stdout { ignore: vec![] },
        "on by default"
    );
    let off = GOOD.replace("[[bench]]\n", "[[bench]]\ncheck_output = false\n");
    let err = parse(d.path(), &off).unwrap_err().to_string();
    assert!(err.contains("bench[0].no_check_reason"), "{err}");
    let off = GOOD.replace(
        "[[bench]]\n",
        "[[bench]]\ncheck_output = false\nno_check_reason = \"prints a timestamp\"\n",
    );
    assert_eq!(
        parse(d.path(), &off).unwrap().benches[0].output_check,
        OutputCheck::Off {
            reason: "prints a timestamp".into()
        }
    );
    let file = GOOD.replace("[[bench]]\n", "[[bench]]\noutput_file = \"out/r.txt\"\n");
    assert_eq!(
        parse(d.path(), &file).unwrap().benches[0].output_check,
        OutputCheck::File {
            path: "out/r.txt".into(),
            equivalence: None
        }
    );
    let judged = GOOD.replace(
        "[[bench]]\n",
        "[[bench]]\noutput_file = \"out/r.txt\"\nequivalence = \"python3 same.py\"\n",
    );
    assert_eq!(
        parse(d.path(), &judged).unwrap().benches[0].output_check,
        OutputCheck::File {
            path: "out/r.txt".into(),
            equivalence: Some("python3 same.py".into())
        }
    );
    let alone = GOOD.replace(
        "[[bench]]\n",
        "[[bench]]\nequivalence = \"python3 same.py\"\n",
    );
    assert!(
        parse(d.path(), &alone)
            .unwrap_err()
            .to_string()
            .contains("bench[0].equivalence"),
        "an equivalence command without an output file is refused, naming the field"
    );
    let escape = GOOD.replace("[[bench]]\n", "[[bench]]\noutput_file = \"../r.txt\"\n");
    assert!(
        parse(d.path(), &escape)
            .unwrap_err()
            .to_string()
            .contains("bench[0].output_file")
    );
    // The figure an output metric prints is masked by the timer, its line kept.
    let metric = GOOD.replace(
        "[[bench]]\n",
        "[[bench]]\nmetric = \"output\"\npattern = \"took ([0-9.]+)s\"\nignore_lines = [\"^date:\"]\n",
    );
    assert_eq!(
        parse(d.path(), &metric).unwrap().benches[0].output_check,
        OutputCheck::Stdout {
            ignore: vec!["^date:".into()]
        }
    );
    let bad = GOOD.replace("[[bench]]\n", "[[bench]]\nignore_lines = [\"(\"]\n");
    assert!(
        parse(d.path(), &bad)
            .unwrap_err()
            .to_string()
            .contains("bench[0].ignore_lines[0]")
    );
}

#[test]
fn every_setting_that_changes_a_result_changes_the_identity() {
    let d = task_dir();
    let base = parse(d.path(), GOOD).unwrap().evaluation_identity();
    for (from, to) in [
        (
            "[[bench]]\n",
            "[[bench]]\ncheck_output = false\nno_check_reason = \"x\"\n",
        ),
        ("[[bench]]\n", "[[bench]]\nignore_lines = [\"^t:\"]\n"),
        ("[[bench]]\n", "[[bench]]\noutput_file = \"out.txt\"\n"),
        ("[[bench]]\n", "[[bench]]\nmax_runs = 40\n"),
        ("[[bench]]\n", "[[bench]]\nwarmups = 3\n"),
        (
            "[[bench]]\n",
            "[[bench]]\nmetric = \"output\"\npattern = \"t: ([0-9.]+)\"\nmetric_unit = \"ms\"\n",
        ),
        (
            "command = \"python3 test.py\"",
            "command = \"python3 test.py -v\"",
        ),
        ("[source]", "[resources]\ndisk = \"1g\"\n[source]"),
        (
            "protected = [\"bench.py\", \"tests/**\"]",
            "protected = [\"bench.py\"]",
        ),
    ] {
        let changed = parse(d.path(), &GOOD.replace(from, to))
            .unwrap()
            .evaluation_identity();
        assert_ne!(changed, base, "{to}");
    }
    // Prose does not.
    let prose = parse(d.path(), &GOOD.replace("\"demo\"", "\"another\""))
        .unwrap()
        .evaluation_identity();
    assert_eq!(prose, base);
}

#[test]
fn memory_sizes() {
    assert_eq!(parse_memory("512m").unwrap(), 512 << 20);
    assert_eq!(parse_memory("2g").unwrap(), 2 << 30);
    assert_eq!(parse_memory("1.5GiB").unwrap(), 3 << 29);
    assert!(parse_memory("1k").is_err());
    assert!(parse_memory("12x").is_err());
}

#[test]
fn output_metric_needs_a_group() {
    let d = task_dir();
    let text = GOOD.replace(
        "[[bench]]\n",
        "[[bench]]\nmetric = \"output\"\npattern = \"time: [0-9.]+\"\n",
    );
    let err = parse(d.path(), &text).unwrap_err().to_string();
    assert!(err.contains("capture group"), "{err}");
}

/// A dataset's task may not read host files into its image, nor hand git an option. (On
/// 7b25252 `"/opt/leak/environ" = "/proc/self/environ"` put the harness's environment, with
/// every key it held, into the image.)
#[test]
fn task_paths_stay_in_the_folder_and_revisions_are_revisions() {
    let d = task_dir();
    let cases = [
        (
            GOOD.replace(
                "[test]",
                "[image.files]\n\"/opt/leak/environ\" = \"/proc/self/environ\"\n[test]",
            ),
            "image.files",
        ),
        (
            GOOD.replace("patch = \"human.patch\"", "patch = \"../../etc/passwd\""),
            "human.patch",
        ),
        (
            GOOD.replace("path = \"repo\"", "path = \"/etc\""),
            "source.path",
        ),
        (
            GOOD.replace(
                "path = \"repo\"",
                "git = \"repo\"\nbase_commit = \"--output=/tmp/x\"",
            ),
            "source.base_commit",
        ),
        (
            GOOD.replace(
                "path = \"repo\"",
                "url = \"--upload-pack=touch /tmp/x\"\nbase_commit = \"v1\"",
            ),
            "source.url",
        ),
    ];
    for (text, field) in cases {
        let e = format!("{:#}", parse(d.path(), &text).unwrap_err());
        assert!(e.contains(&format!("field `{field}")), "{field}: {e}");
    }
    std::os::unix::fs::symlink("/etc/hostname", d.path().join("link")).unwrap();
    let via_link = GOOD.replace("[test]", "[image.files]\n\"/x\" = \"link\"\n[test]");
    let e = format!("{:#}", parse(d.path(), &via_link).unwrap_err());
    assert!(e.contains("outside the task's folder"), "{e}");
}

#[test]
fn a_prebuilt_image_takes_a_human_commit_by_object_id_with_or_without_a_patch() {
    let d = task_dir();
    let image = GOOD.replace("path = \"repo\"", "image = \"gso.eval.x86_64.a:latest\"");
    let commit = "78CE88bcb6847e3d22cd2627f03059a3b5cff85c";
    for (human, patch) in [
        (format!("commit = \"{commit}\""), None),
        (
            format!("commit = \"{commit}\"\npatch = \"human.patch\""),
            Some(d.path().join("human.patch")),
        ),
    ] {
        let t = parse(d.path(), &image.replace("patch = \"human.patch\"", &human)).unwrap();
        assert_eq!(
            t.human,
            HumanRef::ImageCommit {
                commit: commit.to_ascii_lowercase(),
                patch
            }
        );
    }
    // A ref name means nothing in an image that keeps no ref to the commit.
    let err = parse(
        d.path(),
        &image.replace("patch = \"human.patch\"", "commit = \"HEAD~1\""),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("field `human.commit`") && err.contains("object id"),
        "{err}"
    );
    // Both only with an image: a git source's commit is the human, a patch beside it is
    // ambiguous.
    let err = parse(
        d.path(),
        &GOOD
            .replace(
                "path = \"repo\"",
                "git = \"repo\"\nbase_commit = \"abc1234\"",
            )
            .replace(
                "patch = \"human.patch\"",
                "patch = \"human.patch\"\ncommit = \"abc1235\"",
            ),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("field `human`"), "{err}");
}

//! The suite runs the product with the defaults users get: a setting that turns a check off
//! appears only in the tests of that setting, and in no script (scripts/, .ci/). A simple
//! scan of the sources: a new override, or a test that sets one to get past a check it
//! does not test, fails here.

use crate::common::repo_root;

/// Each setting that turns a check off, its spellings, and the tests that test it (by
/// function name).
const OVERRIDES: &[(&[&str], &[&str])] = &[
    (
        &["--disk-check", "HARNESS_DISK_CHECK"],
        &["a_run_whose_containers_may_not_fit_on_disk_is_refused_before_it_starts"],
    ),
    (
        &[
            "--allow-outside-task-paths",
            "HARNESS_ALLOW_OUTSIDE_TASK_PATHS",
        ],
        &[],
    ),
    (
        &["--allow-mixed-machines"],
        &["reports_regenerate_identically_and_refuse_mixed_machines"],
    ),
    (
        &["\"--allow-mixed\""],
        &["run_and_compare_pages_render_with_the_json_numbers_and_nothing_hostile_runs"],
    ),
    (
        &["--skip-gpu"],
        &[
            "opt_at_k_writes_junit_and_gates_its_exit_code",
            "a_gpu_task_without_gpus_gets_a_clear_error_and_cpu_tasks_finish",
        ],
    ),
];

/// The function each line of a Rust file is in (the last `fn` before it).
fn enclosing_functions(text: &str) -> Vec<Option<String>> {
    let mut current = None;
    text.lines()
        .map(|line| {
            let t = line.trim_start();
            for prefix in ["fn ", "pub fn ", "async fn ", "pub async fn "] {
                if let Some(rest) = t.strip_prefix(prefix) {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    current = Some(name);
                }
            }
            current.clone()
        })
        .collect()
}

fn files_under(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// Where a spelling is used outside the tests of its setting: `file:line (fn)`.
fn misuses(root: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut files = Vec::new();
    for dir in ["tests", "scripts", ".ci"] {
        files_under(&root.join(dir), &mut files);
    }
    files.sort();
    for path in files {
        let rel = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .display()
            .to_string();
        // This scan's own table.
        if rel == "tests/overrides.rs" {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let is_test = rel.starts_with("tests/") && rel.ends_with(".rs");
        let functions = enclosing_functions(&text);
        for (i, line) in text.lines().enumerate() {
            // Comments may name a setting; only code sets one.
            let code = line.trim_start();
            if code.starts_with("//") || code.starts_with('#') {
                continue;
            }
            for (spellings, allowed) in OVERRIDES {
                if !spellings.iter().any(|s| line.contains(s)) {
                    continue;
                }
                let within = functions[i].as_deref().unwrap_or("");
                if is_test && allowed.contains(&within) {
                    continue;
                }
                found.push(format!("{rel}:{} ({within}): {}", i + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn no_test_or_script_turns_off_a_check_it_does_not_test() {
    let found = misuses(&repo_root());
    assert!(
        found.is_empty(),
        "a check turned off outside its own tests (the suite must run with users' defaults):\n{}",
        found.join("\n")
    );
}

/// The scan finds what it looks for: a script or a test elsewhere that sets one.
#[test]
fn the_override_scan_finds_a_test_that_sets_one() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir_all(root.join("tests")).unwrap();
    std::fs::create_dir_all(root.join("scripts")).unwrap();
    std::fs::write(
        root.join("tests/x.rs"),
        "fn helper() {\n    c.env(\"HARNESS_DISK_CHECK\", \"off\");\n}\n\
         fn a_run_whose_containers_may_not_fit_on_disk_is_refused_before_it_starts() {\n    \
         c.args([\"--disk-check\", \"off\"]);\n}\n",
    )
    .unwrap();
    std::fs::write(root.join("scripts/run.sh"), "harness opt-at-k --skip-gpu\n").unwrap();
    let found = misuses(root);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].starts_with("scripts/run.sh:1"), "{found:?}");
    assert!(found[1].starts_with("tests/x.rs:2 (helper)"), "{found:?}");
}

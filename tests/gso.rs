//! GSO's inputs as GSO users have them, against the real daemon: rollout files named
//! `<model>-run_i` evaluated as K samples of one model.

use std::path::Path;

use crate::common::*;

/// demo-agent's prediction of `id`, sample `sample`, renamed as GSO names a rollout.
fn rollout_row(id: &str, sample: u64, name: &str) -> String {
    let text =
        std::fs::read_to_string(repo_root().join("tasks/_predictions/demo-agent.jsonl")).unwrap();
    let mut row: serde_json::Value = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|r| r["instance_id"] == id && r["sample"] == sample)
        .unwrap();
    let m = row.as_object_mut().unwrap();
    m.remove("sample");
    m.insert("model_name_or_path".into(), serde_json::json!(name));
    row.to_string()
}

/// GSO's own code (tests/gso_judge.py) re-makes the run's GSO reports to the same figures.
fn gso_code_agrees(test: &str, dir: &Path) {
    let Some(out) = gso_judge(test, dir) else {
        return;
    };
    assert_eq!(
        out.status.code(),
        Some(0),
        "GSO's code on {}:\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn gso_rollout_files_are_k_samples_of_one_model() {
    if !docker_available("gso_rollout_files") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (i, sample) in [(1, 0), (2, 1)] {
        let name = format!("demo-agent-run_{i}");
        let path = tmp.path().join(format!("{name}.jsonl"));
        write(&path, &rollout_row("primes-sieve", sample, &name));
        files.push(path);
    }
    let out = run(harness()
        .args([
            "opt-at-k",
            "--model",
            "demo-agent",
            "--rollout-per-file",
            "--k",
            "2",
            "--instance-ids",
            "primes-sieve",
            "--run-id",
            "rollouts",
            "--json",
            "--predictions",
        ])
        // Given run_2 first: file i is still sample i in GSO's natural order.
        .arg(&files[1])
        .arg("--predictions")
        .arg(&files[0])
        .arg("--results-dir")
        .arg(tmp.path().join("out")));
    assert_eq!(out.status.code(), Some(0));
    let dir = tmp.path().join("out/rollouts");
    for (sample, name) in [(0, "demo-agent-run_1"), (1, "demo-agent-run_2")] {
        let r = read_json(&dir.join(format!("demo-agent/primes-sieve/{sample}/report.json")));
        assert_eq!(r["status"], "passed", "{r}");
        assert_eq!(r["model"], "demo-agent");
        assert_eq!(r["model_name_or_path"], name);
        let rollout = read_json(&dir.join(format!("rollouts/{name}/{name}.rollouts.report.json")));
        assert_eq!(rollout["summary"]["total_predictions"], 1);
        assert_eq!(rollout["harness"]["rollout"], name);
    }
    let opt = read_json(&dir.join("demo-agent.opt@2.rollouts.report.json"));
    assert_eq!(opt["summary"]["k"], 2);
    // Sample 0 is the 10x sieve (opt_commit), sample 1 the 1.8x one (opt_base only).
    assert_eq!(
        opt["instance_sets"]["opt_commit_ids"],
        serde_json::json!(["primes-sieve"])
    );
    assert_eq!(
        opt["opt_stats"]["primes-sieve"]["report_file"],
        "rollouts/demo-agent-run_1/demo-agent-run_1.rollouts.report.json"
    );
    gso_code_agrees("gso_rollout_files", &dir);

    // Under GSO's criterion, Opt@K is over the whole dataset (GSO's opt_at_k.py loads it
    // whole whatever --instance_ids ran): the three examples not selected are incomplete.
    assert_eq!(opt["summary"]["total_instances"], 1);
    let out = run(harness().args(["report", "--criterion", "gso"]).arg(&dir));
    assert_eq!(out.status.code(), Some(0));
    let opt = read_json(&dir.join("demo-agent.opt@2.rollouts.report.json"));
    assert_eq!(opt["summary"]["total_instances"], 4, "{}", opt["summary"]);
    assert_eq!(
        opt["instance_sets"]["incomplete_ids"],
        serde_json::json!(["dedupe-list", "pair-sum", "word-freq"])
    );
    assert_eq!(opt["summary"]["score"], 25.0);
    gso_code_agrees("gso_rollout_files", &dir);
}

/// Builds the stand-in of a GSO instance image, named as GSO names it.
fn build_gso_image(image: &str) {
    let out = run(std::process::Command::new("docker")
        .args(["build", "-q", "-t", image])
        .arg(repo_root().join("tests/fixtures/gso")));
    assert_eq!(out.status.code(), Some(0), "docker build {image}");
}

#[test]
fn an_imported_gso_row_runs_on_its_image_with_gsos_reference_protocol() {
    if !docker_available("imported_gso_row") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let id = "Fake__fastmath-1";
    build_gso_image("gso.eval.x86_64.fake__fastmath-1:latest");
    // GSO's dataset as Hugging Face serves it: Parquet (tests/fixtures/gso/make_rows.py).
    let rows = repo_root().join("tests/fixtures/gso/rows.parquet");
    let dataset = tmp.path().join("gso-tasks");
    let out = run(harness()
        .args(["tasks", "import-gso"])
        .arg(&rows)
        .arg("--out")
        .arg(&dataset)
        .args(["--no-network", "--cpus", "1", "--memory", "1g"]));
    assert_eq!(out.status.code(), Some(0));
    assert!(dataset.join(id).join("task.toml").is_file());

    // Sample 0: the human patch itself (math.fsum: its sum differs from base's in the last
    // bits, within the test's tolerance); sample 1: the same code, its result off by 0.1%;
    // sample 2: base's code that first looks for a stored result anywhere it can read and
    // returns that (GSO's reference in /opt/gso-reference was readable until the check
    // moved out of the test's process: it was judged opt_base there, with base's code);
    // sample 3: a result that pickles as a call, which where it is unpickled (the check)
    // prints the check's success and exits 0 (passed and opt_commit before the check's
    // loads were held to data).
    let patch =
        |f: &str| std::fs::read_to_string(repo_root().join("tests/fixtures/gso").join(f)).unwrap();
    let preds = tmp.path().join("preds.jsonl");
    let row = |sample: u64, p: &str| {
        serde_json::json!({"instance_id": id, "model_name_or_path": "gso-model",
            "sample": sample, "model_patch": patch(p)})
        .to_string()
    };
    write(
        &preds,
        &format!(
            "{}\n{}\n{}\n{}\n",
            row(0, "human.patch"),
            row(1, "off_by_a_thousandth.patch"),
            row(2, "reads_the_reference.patch"),
            row(3, "unpickles_into_the_check.patch")
        ),
    );
    let secret = "hf_harness_test_0123456789abcdef";
    let out = run(harness()
        .env("HF_TOKEN", secret)
        .env("HARNESS_PASS_ENV", "HF_TOKEN")
        .args([
            "opt-at-k",
            "--model",
            "gso-model",
            "--k",
            "4",
            "--run-id",
            "gso",
        ])
        .arg("--dataset")
        .arg(&dataset)
        .arg("--predictions")
        .arg(&preds)
        .arg("--results-dir")
        .arg(tmp.path().join("out")));
    assert_eq!(out.status.code(), Some(0));
    let dir = tmp.path().join("out/gso");
    let human = read_json(&dir.join(format!("gso-model/{id}/0/report.json")));
    assert_eq!(human["status"], "passed", "{human}");
    assert_eq!(human["opt_base"], true, "{human}");
    assert_eq!(human["opt_commit"], true, "{human}");
    // The stand-in image holds no opt_commit: the human is the row's gt_diff, said so.
    let apply_log =
        std::fs::read_to_string(dir.join(format!("gso-model/{id}/reference/human/apply.log")))
            .unwrap();
    assert!(
        apply_log.contains("does not hold opt_commit 1111111")
            && apply_log.contains("HARNESS_APPLY_OK git apply"),
        "{apply_log}"
    );
    let off = read_json(&dir.join(format!("gso-model/{id}/1/report.json")));
    assert_eq!(off["status"], "test_failed", "{off}");
    let detail = off["detail"].as_str().unwrap_or("");
    assert!(
        detail.contains("is not the reference"),
        "the reason names the failed equivalence check: {detail}"
    );
    // The check ran in base's container, once per pair of results: the human's and the
    // off sample's against base's, the one equivalent, the other not.
    let bench = read_json(&dir.join(format!("gso-model/{id}/1/bench.json")));
    let judged = bench["equivalence"].as_array().cloned().unwrap_or_default();
    assert!(
        judged.iter().any(|j| j["equivalent"] == true)
            && judged.iter().any(|j| j["equivalent"] == false
                && j["detail"]
                    .as_str()
                    .unwrap_or("")
                    .contains("is not the reference")),
        "{judged:?}"
    );
    let snoop = read_json(&dir.join(format!("gso-model/{id}/2/report.json")));
    assert_eq!(snoop["status"], "passed", "{snoop}");
    assert_eq!(
        snoop["opt_base"], false,
        "no stored result was in its reach: {snoop}"
    );
    let code = read_json(&dir.join(format!("gso-model/{id}/3/report.json")));
    assert_eq!(code["status"], "test_failed", "{code}");
    assert_eq!(code["opt_base"], false, "{code}");
    let detail = code["detail"].as_str().unwrap_or("");
    assert!(
        detail.contains("names builtins.exec"),
        "the refusal names what the stored result called: {detail}"
    );
    // The token reached the tests (they print it) and no file of the run holds it.
    let test_log =
        std::fs::read_to_string(dir.join(format!("gso-model/{id}/1/test_output.txt"))).unwrap();
    assert!(test_log.contains("token: ***"), "{test_log}");
    let mut stack = vec![dir.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let bytes = std::fs::read(&p).unwrap();
                assert!(
                    !String::from_utf8_lossy(&bytes).contains(secret),
                    "{} holds the token",
                    p.display()
                );
            }
        }
    }
    assert!(containers_of_run("gso").is_empty());
    gso_code_agrees("imported_gso_row", &dir);
}

/// A GSO task whose instance image is not on the engine (and cannot be pulled here): the
/// run stops before any container starts, naming the image and GSO's pull-and-retag
/// command; no sample is written as failed.
#[test]
fn a_missing_gso_image_stops_the_run_before_any_container_naming_the_pull() {
    if !docker_available("missing_gso_image") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let id = "Fake__fastmath-1";
    let dataset = tmp.path().join("gso-tasks");
    let out = run(harness()
        .args(["tasks", "import-gso"])
        .arg(repo_root().join("tests/fixtures/gso/rows.parquet"))
        .arg("--out")
        .arg(&dataset)
        .args(["--image-prefix", "gso.eval.absent", "--no-network"]));
    assert_eq!(out.status.code(), Some(0));
    let preds = tmp.path().join("preds.jsonl");
    let patch =
        std::fs::read_to_string(repo_root().join("tests/fixtures/gso/human.patch")).unwrap();
    write(
        &preds,
        &serde_json::json!({"instance_id": id, "model_name_or_path": "m", "model_patch": patch})
            .to_string(),
    );
    let out = run(harness()
        .args(["opt-at-k", "--model", "m", "--k", "1", "--run-id", "absent"])
        .arg("--dataset")
        .arg(&dataset)
        .arg("--predictions")
        .arg(&preds)
        .arg("--results-dir")
        .arg(tmp.path().join("out")));
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let image = "gso.eval.absent.x86_64.fake__fastmath-1:latest";
    assert!(
        stderr.contains(&format!(
            "docker pull slimshetty/gso:gso.eval.absent.x86_64.fake__fastmath-1 && docker tag slimshetty/gso:gso.eval.absent.x86_64.fake__fastmath-1 {image}"
        )),
        "{stderr}"
    );
    assert!(containers_of_run("absent").is_empty());
    assert!(
        !tmp.path().join("out/absent/m").join(id).exists(),
        "no sample was run or written"
    );
}

/// A GSO instance image made here by GSO's own recipe (gsobench's Dockerfile generator,
/// install script and eval script; scripts/gso_images.py swaps only what cannot be had
/// here): tornado 6.4.1 -> 6.4.2's parse_cookie, from PyPI's sources. The generator still
/// makes the shipped row, and the row runs end to end through import-gso on that image with
/// GSO's install (bash, uv, GSO's environment): a patch identical to the human fix is
/// passed and opt_commit under GSO's criterion, a no-op patch is passed and not opt_base,
/// and GSO's own code agrees with the reports.
#[test]
fn a_faithful_gso_image_runs_a_human_identical_patch_to_opt_commit() {
    if !docker_available("faithful_gso_image") {
        return;
    }
    let Some(python) = gso_python("faithful_gso_image") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let rows = tmp.path().join("rows.jsonl");
    let out = run(std::process::Command::new(&python)
        .arg(repo_root().join("scripts/gso_images.py"))
        .args(["--only", "parse_cookie", "--rows-out"])
        .arg(&rows));
    assert_eq!(out.status.code(), Some(0), "scripts/gso_images.py");
    let shipped = std::fs::read_to_string(repo_root().join("tasks/_gso/rows.jsonl")).unwrap();
    let made = std::fs::read_to_string(&rows).unwrap();
    let row: serde_json::Value = serde_json::from_str(made.lines().next().unwrap()).unwrap();
    let id = row["instance_id"].as_str().unwrap().to_string();
    assert!(
        shipped.lines().any(|l| l == made.trim_end()),
        "the recipe no longer makes the shipped row of {id}"
    );

    let dataset = tmp.path().join("gso-tasks");
    let out = run(harness()
        .args(["tasks", "import-gso"])
        .arg(&rows)
        .arg("--out")
        .arg(&dataset));
    assert_eq!(out.status.code(), Some(0));
    // A comment added at the top of the module the fix changes: nothing that runs differs.
    let noop = "diff --git a/tornado/httputil.py b/tornado/httputil.py\n\
                --- a/tornado/httputil.py\n+++ b/tornado/httputil.py\n\
                @@ -1,3 +1,4 @@\n+# a comment: nothing that runs changes\n";
    let context = row["gt_diff"].as_str().unwrap();
    assert!(context.contains("tornado/httputil.py"));
    let base_lines = std::process::Command::new("docker")
        .args(["run", "--rm", "--network", "none"])
        .arg(format!("gso.eval.x86_64.{}:latest", id.to_lowercase()))
        .args(["head", "-n", "3", "/testbed/tornado/httputil.py"])
        .output()
        .unwrap();
    let head: String = String::from_utf8_lossy(&base_lines.stdout)
        .lines()
        .map(|l| format!(" {l}\n"))
        .collect();
    let preds = tmp.path().join("preds.jsonl");
    write(
        &preds,
        &format!(
            "{}\n{}\n",
            serde_json::json!({"instance_id": id, "model_name_or_path": "m", "sample": 0,
                "model_patch": row["gt_diff"]}),
            serde_json::json!({"instance_id": id, "model_name_or_path": "m", "sample": 1,
                "model_patch": format!("{noop}{head}")}),
        ),
    );
    let out = run(harness()
        .args([
            "opt-at-k",
            "--model",
            "m",
            "--k",
            "2",
            "--run-id",
            "faithful",
            "--criterion",
            "gso",
            // GSO's rule on five means, no interval: this test's runs of the same code are
            // 2.7 to 4.7 s apart on 2 cores, so a no-op reaches round(1.05, 1) = 1.1 over
            // base in about one run of four (seen twice in a row here); the human is 19x.
            "--min-speedup",
            "1.3",
        ])
        .arg("--dataset")
        .arg(&dataset)
        .arg("--predictions")
        .arg(&preds)
        .arg("--results-dir")
        .arg(tmp.path().join("out")));
    assert_eq!(out.status.code(), Some(0));
    let dir = tmp.path().join("out/faithful");
    let human = read_json(&dir.join(format!("m/{id}/0/report.json")));
    assert_eq!(human["status"], "passed", "{human}");
    assert_eq!(human["opt_commit"], true, "{human}");
    let noop = read_json(&dir.join(format!("m/{id}/1/report.json")));
    assert_eq!(noop["status"], "passed", "{noop}");
    assert_eq!(noop["opt_base"], false, "{noop}");
    // The human is opt_commit itself, from the image's objects, as GSO checks it out.
    let apply_log =
        std::fs::read_to_string(dir.join(format!("m/{id}/reference/human/apply.log"))).unwrap();
    let opt_commit = row["opt_commit"].as_str().unwrap();
    assert!(
        apply_log.contains(&format!("opt_commit {opt_commit} is in the image")),
        "{apply_log}"
    );
    assert!(containers_of_run("faithful").is_empty());
    gso_code_agrees("faithful_gso_image", &dir);
}

/// A prebuilt-image task whose human reference is a commit the image holds without a ref
/// (GSO's `opt_commit`), and the commit moves a submodule (GSO issue #28's shape): the human
/// is the commit's tree, the submodule checked out at the commit's gitlink from the image's
/// own objects (no network), said in its apply.log. A sample that changes only the project's
/// file of that commit is measured apart from it (slow, as base), and a sample that speeds
/// up a file inside the submodule is measured for itself, not given base's timings because
/// git status names the submodule's folder as one path.
#[test]
fn a_human_opt_commit_in_the_image_checks_out_the_submodule_it_moves() {
    if !docker_available("opt_commit_submodule") {
        return;
    }
    let image = "gso.eval.x86_64.fake__submodule-1:latest";
    let out = run(std::process::Command::new("docker")
        .args(["build", "-q", "-t", image])
        .arg(repo_root().join("tests/fixtures/gso-submodule")));
    assert_eq!(out.status.code(), Some(0), "docker build {image}");
    let out = run(std::process::Command::new("docker").args([
        "run",
        "--rm",
        "--network",
        "none",
        image,
        "cat",
        "/root/opt-commit",
    ]));
    let commit = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(commit.len(), 40, "{commit:?}");

    let tmp = tempfile::tempdir().unwrap();
    let id = "Fake__submodule-1";
    write(
        &tmp.path().join(format!("tasks/{id}/task.toml")),
        &format!(
            "[source]\nimage = \"{image}\"\n[human]\ncommit = \"{commit}\"\n\
             [test]\ncommand = \". .venv/bin/activate && python app.py\"\n\
             [[bench]]\nname = \"app\"\ncommand = \"python3 app.py\"\nwarmups = 0\nruns = 3\n\
             [resources]\ncpus = 1\nmemory = \"1g\"\n"
        ),
    );
    let app_only =
        diff("app.py", "VERSION = 1", "VERSION = 2").replace("@@ -1,1 +1,1 @@", "@@ -6 +6 @@");
    let kernel = "vendor/kernel/kernel.py";
    let inside = diff(kernel, "    time.sleep(0.25)", "    time.sleep(0.02)")
        .replace("@@ -1,1 +1,1 @@", "@@ -6 +6 @@");
    // A sample that looks for the human's fix in git (the commit, and the submodule's
    // later commit): its test fails when it finds either.
    let snoop = snooping_patch(&commit);
    let preds = tmp.path().join("preds.jsonl");
    let rows: String = [app_only, inside, snoop]
        .iter()
        .enumerate()
        .map(|(i, p)| {
            serde_json::json!({"instance_id": id, "model_name_or_path": "m", "sample": i,
                "model_patch": p})
            .to_string()
                + "\n"
        })
        .collect();
    write(&preds, &rows);
    let out = run(harness()
        .args(["opt-at-k", "--model", "m", "--k", "3", "--run-id", "sub"])
        .arg("--dataset")
        .arg(tmp.path().join("tasks"))
        .arg("--predictions")
        .arg(&preds)
        .arg("--results-dir")
        .arg(tmp.path().join("out")));
    assert_eq!(out.status.code(), Some(0));
    let dir = tmp.path().join("out/sub");
    let apply_log =
        std::fs::read_to_string(dir.join(format!("m/{id}/reference/human/apply.log"))).unwrap();
    assert!(
        apply_log.contains(&format!("opt_commit {commit} is in the image"))
            && apply_log.contains("submodule vendor/kernel -> "),
        "{apply_log}"
    );
    let app_only = read_json(&dir.join(format!("m/{id}/0/report.json")));
    assert_eq!(app_only["status"], "passed", "{app_only}");
    assert_eq!(app_only["opt_base"], false, "{app_only}");
    let inside = read_json(&dir.join(format!("m/{id}/1/report.json")));
    assert_eq!(inside["status"], "passed", "{inside}");
    assert_eq!(inside["opt_base"], true, "{inside}");
    // Human is the commit's tree: the submodule's fast kernel (0.25 s -> 0.02 s a run).
    let human_speedup = app_only["opt_stats"]["gm_speedup_commit_base"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(human_speedup > 3.0, "{app_only}");
    // Base's and the samples' containers hold base's history alone; the human's its commit.
    let snoop = read_json(&dir.join(format!("m/{id}/2/report.json")));
    assert_eq!(snoop["status"], "passed", "{snoop}");
    let test_log = std::fs::read_to_string(dir.join(format!("m/{id}/2/test_output.txt"))).unwrap();
    assert!(
        test_log.contains("snoop: 1 commit(s) in vendor/kernel"),
        "{test_log}"
    );
    assert!(containers_of_run("sub").is_empty());
}

/// A patch whose module, imported by app.py, exits 3 when git can read `commit` or any
/// commit of vendor/kernel past the one checked out (the fix's submodule move).
fn snooping_patch(commit: &str) -> String {
    let module = format!(
        "import subprocess, sys\n\
         G = ['git', '-c', 'safe.directory=*']\n\
         def out(*a):\n\
         \x20   return subprocess.run(G + list(a), capture_output=True, text=True)\n\
         found = out('cat-file', '-e', '{commit}^{{commit}}').returncode == 0\n\
         subs = out('-C', 'vendor/kernel', 'rev-list', '--all').stdout.split()\n\
         sys.stderr.write('snoop: %d commit(s) in vendor/kernel, opt_commit %s\\n' % (len(subs), found))\n\
         if found or len(subs) != 1:\n\
         \x20   sys.exit(3)\n"
    );
    let lines: Vec<&str> = module.lines().collect();
    let added: String = lines.iter().map(|l| format!("+{l}\n")).collect();
    let app = diff("app.py", "VERSION = 1", "VERSION = 1\nimport snoop  # noqa")
        .replace("@@ -1,1 +1,2 @@", "@@ -6 +6,2 @@");
    format!(
        "{app}diff --git a/snoop.py b/snoop.py\nnew file mode 100644\n--- /dev/null\n\
         +++ b/snoop.py\n@@ -0,0 +1,{} @@\n{added}",
        lines.len()
    )
}

/// `container/programs/human_commit.sh` on opt commits whose shapes a shell parser gets wrong: a
/// submodule replaced by files at its path, submodules at paths git quotes (non-ASCII, a
/// space, a tab) moved, and a binary change, a mode change and a rename; each ends at the
/// commit's tree, applied by the cascade's first strategy.
#[test]
fn the_human_commit_script_applies_every_shape_of_opt_commit() {
    if !docker_available("human_commit_shapes") {
        return;
    }
    let image = "harness-test-human-commit-paths:latest";
    let out = run(std::process::Command::new("docker")
        .args(["build", "-q", "-t", image])
        .arg(repo_root().join("tests/fixtures/human-commit-paths")));
    assert_eq!(out.status.code(), Some(0), "docker build {image}");
    let check = |name: &str, after: &str| -> String {
        let script = format!(
            "mkdir -p /opt/harness && cp /h/human_commit.sh /h/apply_patch.sh /opt/harness/ \
             && : > /opt/harness/patch.diff \
             && sh /opt/harness/human_commit.sh $(cat /root/{name}) /opt/harness/patch.diff \
             && cd /testbed && {after}"
        );
        let out = run(std::process::Command::new("docker")
            .args(["run", "--rm", "--network", "none", "-v"])
            .arg(format!(
                "{}:/h:ro",
                repo_root().join("container/programs").display()
            ))
            .args([image, "sh", "-c", &script]));
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(0), "{name}: {said}");
        assert!(
            said.contains("HARNESS_APPLY_OK git apply\n")
                && said.contains("HARNESS_APPLY_OK opt_commit "),
            "{name}: {said}"
        );
        said
    };
    let a = check("optA", "cat vendor/kernel/kernel.py");
    assert!(a.ends_with("fast\n"), "{a}");
    for (name, path) in [
        ("optB", "vendor/ké"),
        ("optC", "vendor/sp ace"),
        ("optD", "vendor/t\tab"),
    ] {
        let said = check(name, &format!("cat '{path}/kernel.py'"));
        assert!(said.ends_with("fast\n"), "{name}: {said}");
    }
    let e = check(
        "optE",
        "test -x app.py && test -f new_name.py && ! test -e old_name.py && od -c blob.bin",
    );
    assert!(e.contains("a   r   y   2"), "{e}");
}

/// The check an import writes loads the variant's stored result in a child that hands back
/// plain data only, and there the load may name only what base's result named: a pickle that
/// calls exec, os.system or getattr is refused before it runs (nothing of base's code can be
/// run for it, untimed); a result of base's types loads and is compared; one that differs
/// fails with the test's own message.
#[test]
fn the_imported_check_loads_a_variants_stored_result_as_data_only() {
    let tmp = tempfile::tempdir().unwrap();
    let dataset = tmp.path().join("tasks");
    let out = run(harness()
        .args(["tasks", "import-gso"])
        .arg(repo_root().join("tests/fixtures/gso/rows.jsonl"))
        .arg("--out")
        .arg(&dataset));
    assert_eq!(out.status.code(), Some(0));
    let check = dataset.join("Fake__fastmath-1/gso_tests/check.py");
    let test = tmp.path().join("t.py");
    // A test whose stored results are pickles, compared with ==.
    write(
        &test,
        "import pickle\n\
         def load_result(f):\n    with open(f, 'rb') as h:\n        return pickle.load(h)\n\
         def check_equivalence(r, c):\n    assert r == c, (r, c)\n",
    );
    let marker = tmp.path().join("ran");
    let maker = r#"import datetime, os, pickle
class Call:
    def __init__(self, f, *a): self.f, self.a = f, a
    def __reduce__(self): return (self.f, self.a)
day = datetime.date(2020, 1, 1)
payload = "import os; open(os.environ['MARKER'], 'w').write('ran'); print('equivalent'); os._exit(0)"
files = {
    "base": {"n": 3, "day": day, "how": Call(getattr, day, "year")},
    "same": {"n": 3, "day": datetime.date(2020, 1, 1), "how": 2020},
    "other_day": {"n": 3, "day": datetime.date(2020, 1, 2), "how": 2020},
    "exec": {"n": 3, "day": Call(exec, payload)},
    "system": {"n": 3, "day": Call(os.system, "touch $MARKER")},
    "getattr": {"n": 3, "day": day, "how": Call(getattr, day, "year")},
}
for name, value in files.items():
    with open(name, "wb") as f:
        pickle.dump(value, f)
"#;
    let made = std::process::Command::new("python3")
        .current_dir(tmp.path())
        .args(["-c", maker])
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let judge = |variant: &str| {
        let out = std::process::Command::new("python3")
            .current_dir(tmp.path())
            .arg(&check)
            .arg(&test)
            .env("HARNESS_REFERENCE_OUTPUT", "base")
            .env("HARNESS_OUTPUT", variant)
            .env("MARKER", &marker)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        (out.status.code(), said)
    };
    let (code, said) = judge("same");
    assert_eq!(code, Some(0), "{said}");
    let (code, said) = judge("other_day");
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("AssertionError"), "{said}");
    // A pickle that calls what base's result never named: refused in the child, before it
    // runs; getattr is refused even though base's own result named it (a builtin that is
    // not a data type reaches anything).
    for (variant, named) in [
        ("exec", "builtins.exec"),
        ("system", "posix.system"),
        ("getattr", "builtins.getattr"),
    ] {
        let (code, said) = judge(variant);
        assert_eq!(code, Some(1), "{variant}: {said}");
        assert!(
            said.contains(&format!("names {named}")),
            "{variant}: {said}"
        );
        assert!(!marker.exists(), "{variant} ran its payload");
    }
}

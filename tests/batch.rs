//! `harness run CONFIG.toml` against the real daemon: two models over two of the shipped
//! example tasks in one batch folder, each entry's reports in its own run folder, both
//! ranked in batch.json; the same command again reuses every sample.

use std::path::Path;

use crate::common::*;

/// demo-agent's rows for the chosen tasks, and a second model "weak" made of the same rows
/// with every patch that passes replaced by an empty one.
fn write_predictions(dir: &Path, tasks: &[&str]) {
    let text = std::fs::read_to_string(repo_root().join("tasks/_predictions/demo-agent.jsonl"))
        .expect("demo-agent.jsonl");
    let mut weak = String::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut row: serde_json::Value = serde_json::from_str(line).expect("a JSON row");
        let id = row["instance_id"].as_str().unwrap_or_default().to_string();
        if !tasks.contains(&id.as_str()) {
            continue;
        }
        let sample = row["sample"].as_u64().expect("sample");
        // Samples designed to pass (tasks/_predictions/EXPECTED.md): dedupe-list 1,
        // word-freq 2.
        if (id == "dedupe-list" && sample == 1) || (id == "word-freq" && sample == 2) {
            row["model_patch"] = serde_json::json!("");
        }
        row["model_name_or_path"] = serde_json::json!("weak");
        weak.push_str(&row.to_string());
        weak.push('\n');
    }
    write(&dir.join("preds/weak.jsonl"), &weak);
}

fn batch(config: &Path, results: &Path) -> (Option<i32>, serde_json::Value) {
    let out = run(harness()
        .arg("run")
        .arg(config)
        .arg("--json")
        .arg("--results-dir")
        .arg(results));
    let json = serde_json::from_slice(&out.stdout).expect("--json prints batch.json");
    (out.status.code(), json)
}

#[test]
fn a_batch_of_two_models_gives_each_its_reports_and_ranks_both() {
    if !docker_available("batch") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let tasks = ["dedupe-list", "word-freq"];
    write_predictions(tmp.path(), &tasks);
    let config = tmp.path().join("conf/batch.toml");
    write(
        &config,
        &format!(
            "name = \"two-models\"\nparallelism = 1\ndataset = {dataset:?}\nk = 3\n\
             instance_ids = [\"dedupe-list\", \"word-freq\"]\n\
             replicas = 2\nmin_rounds = 5\nmax_rounds = 5\n\n\
             [[entry]]\nmodel = \"weak\"\npredictions = \"../preds/weak.jsonl\"\n\n\
             [[entry]]\nmodel = \"demo-agent\"\npredictions = {demo:?}\n",
            dataset = repo_root().join("tasks").display().to_string(),
            demo = repo_root()
                .join("tasks/_predictions/demo-agent.jsonl")
                .display()
                .to_string(),
        ),
    );
    let results = tmp.path().join("out");
    let (code, first) = batch(&config, &results);
    assert_eq!(code, Some(0), "{first:#}");
    let dir = results.join("two-models");
    assert_eq!(read_json(&dir.join("batch.json")), first);
    assert!(dir.join("summary.md").is_file());

    // Each entry is what opt-at-k writes, in its own folder inside the batch folder.
    for model in ["weak", "demo-agent"] {
        let run = dir.join(model);
        for f in [
            format!("{model}.{model}.report.json"),
            format!("{model}.opt@3.{model}.report.json"),
            "summary.md".into(),
            "results.csv".into(),
            "run.json".into(),
        ] {
            assert!(run.join(&f).is_file(), "{} missing", run.join(&f).display());
        }
        let report = read_json(&run.join(format!("{model}.opt@3.{model}.report.json")));
        assert_eq!(report["complete"], true);
        assert_eq!(report["summary"]["total_instances"], 2);
        let entry = first["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["model"] == model)
            .unwrap_or_else(|| panic!("{model} not in batch.json"));
        // The batch's figures are the entry's own reports', intervals included.
        assert_eq!(entry["figures"]["opt_at_k"], report["score"]);
        assert_eq!(entry["figures"]["opt_at_k_ci"], report["opt_at_k_ci"]["3"]);
        assert_eq!(entry["figures"]["pass_at_k"], report["pass_at_k"]["3"]);
        assert_eq!(
            entry["figures"]["pass_at_1_ci"],
            report["pass_at_k_ci"]["1"]
        );
        assert_eq!(entry["state"], "complete");
    }

    // Ranked: demo-agent passes on both tasks, weak on none.
    let ranked: Vec<(String, serde_json::Value)> = first["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["label"].as_str().unwrap().to_string(), e["rank"].clone()))
        .collect();
    assert_eq!(
        ranked,
        vec![
            ("demo-agent".to_string(), serde_json::json!(1)),
            ("weak".to_string(), serde_json::json!(2)),
        ]
    );
    assert_eq!(first["comparable"], true);
    assert_eq!(first["complete"], true);
    assert_eq!(first["entries"][1]["figures"]["opt_at_k"], 0.0);
    assert_eq!(first["entries"][1]["figures"]["pass_at_k"], 0.0);
    assert_eq!(first["entries"][0]["figures"]["pass_at_k"], 100.0);

    // The same command resumes: nothing is evaluated again, the ranking is the same.
    let (code, second) = batch(&config, &results);
    assert_eq!(code, Some(0));
    assert_eq!(second["entries"], first["entries"]);
    for model in ["weak", "demo-agent"] {
        let run_json = read_json(&dir.join(model).join("run.json"));
        assert_eq!(run_json["model"], model);
    }
    assert!(containers_of_run("weak").is_empty() && containers_of_run("demo-agent").is_empty());
}

#[test]
fn a_bad_config_runs_nothing_and_names_the_problem() {
    // No Docker needed: the config is refused before anything starts.
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("bad.toml");
    write(
        &config,
        "name = \"bad\"\nk = 0\n[[entry]]\nmodel = \"m\"\npredictions = \"missing.jsonl\"\n",
    );
    let out = run(harness()
        .arg("run")
        .arg(&config)
        .arg("--results-dir")
        .arg(tmp.path().join("out")));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml"), "{err}");
    assert!(err.contains("entry 1 (model \"m\"): predictions:"), "{err}");
    assert!(err.contains("k: must be at least 1"), "{err}");
    assert!(!tmp.path().join("out/bad").exists());
}

#[test]
fn ctrl_c_stops_the_batch_after_the_running_entry_and_keeps_what_is_done() {
    use std::process::Stdio;
    if !docker_available("batch ctrl_c") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    make_task(&ds, "long", SLOW, FAST, "");
    let toml = ds.join("long/task.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    write(&toml, &text.replace("runs = 2", "runs = 200"));
    let p = tmp.path().join("p.jsonl");
    predictions(&p, &[("long", Some(&diff("mod.py", SLOW, FAST)))]);
    let config = tmp.path().join("batch.toml");
    write(
        &config,
        "name = \"stopped\"\ndataset = \"ds\"\nk = 1\nreplicas = 1\n\
         [[entry]]\nmodel = \"test-model\"\nlabel = \"batch-ctrlc-a\"\npredictions = \"p.jsonl\"\n\
         [[entry]]\nmodel = \"test-model\"\nlabel = \"batch-ctrlc-b\"\npredictions = \"p.jsonl\"\n",
    );
    let results = tmp.path().join("out");
    let mut child = harness()
        .args(["-v", "run"])
        .arg(&config)
        .arg("--results-dir")
        .arg(&results)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = stderr_lines(&mut child);
    let seen = wait_for(&rx, "round 2/");
    assert!(
        !containers_of_run("batch-ctrlc-a").is_empty(),
        "measuring, so containers exist: {seen:?}"
    );
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{seen:?}");
    assert!(containers_of_run("batch-ctrlc-a").is_empty());
    assert!(containers_of_run("batch-ctrlc-b").is_empty());
    let dir = results.join("stopped");
    let b = read_json(&dir.join("batch.json"));
    assert_eq!(b["interrupted"], "SIGINT");
    assert_eq!(b["complete"], false);
    assert_eq!(b["exit_code"], 130);
    let state = |label: &str| -> serde_json::Value {
        b["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["label"] == label)
            .map(|e| serde_json::json!([e["state"], e["rank"], e["interrupted"]]))
            .unwrap_or_else(|| panic!("{label} not in batch.json: {b:#}"))
    };
    assert_eq!(
        state("batch-ctrlc-a"),
        serde_json::json!(["partial", null, "SIGINT"])
    );
    assert_eq!(
        state("batch-ctrlc-b"),
        serde_json::json!(["not_run", null, null])
    );
    // The interrupted entry's own reports say partial; the next entry never started.
    let report = read_json(&dir.join("batch-ctrlc-a/test-model.opt@1.batch-ctrlc-a.report.json"));
    assert_eq!(report["complete"], false);
    assert!(!dir.join("batch-ctrlc-b").exists());
    assert!(
        std::fs::read_to_string(dir.join("summary.md"))
            .unwrap()
            .contains("(partial)")
    );
}

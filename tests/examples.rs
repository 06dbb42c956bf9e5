//! The README's main command on the shipped example tasks, against the real daemon: every
//! sample gets the outcome it was designed to have, and running it again builds nothing,
//! re-runs nothing and writes the same reports.

use std::path::Path;

use crate::common::browser;
use crate::common::*;

/// (instance, sample, status, opt_base, opt_commit, apply strategy) as designed in
/// tasks/_predictions/EXPECTED.md.
type Outcome = (
    &'static str,
    usize,
    &'static str,
    bool,
    bool,
    Option<&'static str>,
);

const EXPECTED: &[Outcome] = &[
    (
        "dedupe-list",
        0,
        "test_failed",
        false,
        false,
        Some("git apply"),
    ),
    (
        "dedupe-list",
        1,
        "passed",
        true,
        true,
        Some("patch --fuzz=5"),
    ),
    ("dedupe-list", 2, "empty_patch", false, false, None),
    ("pair-sum", 0, "passed", true, false, Some("git apply")),
    ("pair-sum", 1, "passed", false, false, Some("git apply")),
    ("pair-sum", 2, "empty_patch", false, false, None),
    ("primes-sieve", 0, "passed", true, true, Some("git apply")),
    ("primes-sieve", 1, "passed", true, false, Some("git apply")),
    ("primes-sieve", 2, "passed", false, false, Some("git apply")),
    ("word-freq", 0, "patch_failed", false, false, None),
    ("word-freq", 1, "patch_rejected", false, false, None),
    ("word-freq", 2, "passed", true, true, Some("git apply")),
];

fn main_command(results: &Path) -> serde_json::Value {
    let out = run(harness()
        .args([
            "opt-at-k",
            "--model",
            "demo-agent",
            "--predictions",
            "tasks/_predictions/demo-agent.jsonl",
            "--k",
            "3",
            "--run-id",
            "examples",
            "--json",
        ])
        .arg("--results-dir")
        .arg(results));
    assert_eq!(out.status.code(), Some(0));
    serde_json::from_slice(&out.stdout).expect("--json prints JSON")
}

fn report_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    for name in [
        "demo-agent.examples.report.json",
        "demo-agent.opt@3.examples.report.json",
        "summary.md",
        "results.csv",
        "gso/predictions/demo-agent-run_1.jsonl",
        "gso/logs/run_evaluation/examples/demo-agent-run_1/primes-sieve/test_output.txt",
    ] {
        files.push((name.to_string(), std::fs::read(dir.join(name)).unwrap()));
    }
    for (id, sample, ..) in EXPECTED {
        let rel = format!("demo-agent/{id}/{sample}/report.json");
        files.push((rel.clone(), std::fs::read(dir.join(&rel)).unwrap()));
    }
    files
}

fn without_timestamps(mut run_json: serde_json::Value) -> serde_json::Value {
    if let Some(m) = run_json.as_object_mut() {
        m.remove("started_at");
        m.remove("finished_at");
    }
    run_json
}

#[test]
fn example_predictions_get_their_designed_outcomes_and_a_rerun_changes_nothing() {
    if !docker_available("example_predictions") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("out");
    let first = main_command(&results);
    let dir = results.join("examples");

    let mut problems = Vec::new();
    for &(id, sample, status, opt_base, opt_commit, strategy) in EXPECTED {
        let r = read_json(&dir.join(format!("demo-agent/{id}/{sample}/report.json")));
        let got = (
            r["status"].as_str().unwrap_or("?").to_string(),
            r["opt_base"].as_bool(),
            r["opt_commit"].as_bool(),
            r["apply_strategy"].as_str().map(str::to_string),
        );
        let want = (
            status.to_string(),
            Some(opt_base),
            Some(opt_commit),
            strategy.map(str::to_string),
        );
        if got != want {
            problems.push(format!(
                "{id}/{sample}: got {got:?}, want {want:?}; detail {}; stats {}",
                r["detail"], r["opt_stats"]
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // Scores: 3 of 4 instances have an opt_commit sample; pass and opt curves by hand.
    let t = &first["totals"];
    assert_eq!(t["score"], 75.0);
    assert_eq!(t["opt_commit"], 3);
    let close = |v: &serde_json::Value, want: f64| (v.as_f64().unwrap() - want).abs() < 1e-9;
    assert!(
        close(
            &t["pass_at_k"][0],
            (1.0 + 1.0 / 3.0 + 1.0 / 3.0 + 2.0 / 3.0) / 4.0
        ),
        "{t}"
    );
    assert!(
        close(
            &t["pass_at_k"][1],
            (1.0 + 2.0 / 3.0 + 2.0 / 3.0 + 1.0) / 4.0
        ),
        "{t}"
    );
    assert!(close(&t["pass_at_k"][2], 1.0), "{t}");
    assert!(close(&t["opt_at_k"][0], 0.25), "{t}");
    assert!(close(&t["opt_at_k"][2], 0.75), "{t}");
    let opt_report = read_json(&dir.join("demo-agent.opt@3.examples.report.json"));
    assert_eq!(opt_report["score"], 75.0);
    assert_eq!(opt_report["k"], 3);
    assert_eq!(
        opt_report["instance_sets"]["opt_commit_ids"],
        serde_json::json!(["dedupe-list", "primes-sieve", "word-freq"])
    );
    assert_eq!(opt_report["schema_version"], 1);
    // Every timing of every round is kept.
    let bench = read_json(&dir.join("demo-agent/primes-sieve/0/bench.json"));
    assert_eq!(
        bench["variants"],
        serde_json::json!(["base", "human", "s0", "s1", "s2"])
    );
    assert!(bench["runs"].as_array().unwrap().len() >= 5 * 6);
    // The bench draws its input from its seed and each repetition had its own: base's
    // repetitions answered differently, so its figure is their fastest.
    let timed: Vec<&serde_json::Value> = bench["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["variant"] == "base" && r["warmup"] == false && r["exit_code"] == 0)
        .collect();
    assert!(!timed.is_empty());
    for r in timed {
        let figs = rep_figures(r);
        let fastest = figs.iter().copied().fold(f64::INFINITY, f64::min);
        assert!(
            figs.len() > 1 && r["value"].as_f64() == Some(fastest),
            "{r}"
        );
    }
    assert!(
        containers_of_run("examples").is_empty(),
        "containers left: {:?}",
        containers_of_run("examples")
    );

    // The same command again: nothing built, nothing re-run, the same reports.
    let before = report_files(&dir);
    let run_before = without_timestamps(read_json(&dir.join("run.json")));
    let second = main_command(&results);
    assert_eq!(
        second["invocation"]["images_built"], 0,
        "{}",
        second["invocation"]
    );
    assert_eq!(
        second["invocation"]["evaluated_samples"], 0,
        "{}",
        second["invocation"]
    );
    assert_eq!(
        second["invocation"]["reused_samples"], 12,
        "{}",
        second["invocation"]
    );
    let after = report_files(&dir);
    for ((name, a), (_, b)) in before.iter().zip(&after) {
        assert!(a == b, "{name} changed on a rerun");
    }
    assert_eq!(
        without_timestamps(read_json(&dir.join("run.json"))),
        run_before
    );
    assert!(containers_of_run("examples").is_empty());

    report_page_renders_in_a_browser(&dir);
    gso_tools_read_the_reports(&dir);
}

/// report.html in headless Chromium: one row per sample with report.json's figures, the
/// Opt@K of the opt@K report, the page's script ran, no console message, no network
/// request; a screenshot with a drill-down open (the README's is one of these).
fn report_page_renders_in_a_browser(dir: &Path) {
    let Some(chrome) = browser::chromium("report_page") else {
        return;
    };
    let page = dir.join("report.html");
    let r = browser::render(&chrome, &page);
    assert!(r.console.is_empty(), "console: {:?}", r.console);
    assert!(r.page_requests.is_empty(), "{:?}", r.page_requests);
    assert_eq!(browser::count(&r.dom, "data-sample=\""), EXPECTED.len());
    assert!(r.dom.contains("aria-sort") || r.dom.contains("class=\"sortable\""));
    for &(id, sample, status, ..) in EXPECTED {
        let rep = read_json(&dir.join(format!("demo-agent/{id}/{sample}/report.json")));
        assert!(
            r.dom
                .contains(&format!("data-instance=\"{id}\" data-sample=\"{sample}\"")),
            "{id}/{sample}: no row"
        );
        assert!(
            r.dom.contains(&format!("id=\"s.{id}.{sample}\"")),
            "{id}/{sample}: no drill-down"
        );
        if status != "passed" {
            continue;
        }
        let gm = rep["opt_stats"]["gm_speedup_patch_base"].as_f64().unwrap();
        let hm = rep["opt_stats"]["hm_speedup_patch_commit"]
            .as_f64()
            .unwrap();
        let iv = &rep["intervals"]["gm_speedup_patch_base"];
        assert!(
            r.dom.contains(&format!("data-estimate=\"{gm}\"")),
            "{id}/{sample}: {gm}"
        );
        assert!(
            r.dom.contains(&format!("data-estimate=\"{hm}\"")),
            "{id}/{sample}: {hm}"
        );
        let text = format!(
            "{gm:.2}x [{:.2}, {:.2}]",
            iv["lo"].as_f64().unwrap(),
            iv["hi"].as_f64().unwrap()
        );
        assert!(r.dom.contains(&text), "{id}/{sample}: {text}");
    }
    let opt = read_json(&dir.join("demo-agent.opt@3.examples.report.json"));
    let score = format!("{:.2}%", opt["score"].as_f64().unwrap());
    let card = r.dom.find("id=\"card-opt-at-k\"").expect("the Opt@K card");
    assert!(
        r.dom[card..].starts_with(&format!("id=\"card-opt-at-k\">Opt@3<b>{score}</b>")),
        "{}",
        &r.dom[card..card + 120]
    );
    // At 1280 px nothing scrolls sideways; the samples' status filter and search work.
    let seen = browser::probe(&chrome, &page, 1280, PAGE_PROBE);
    assert_eq!(seen["wider"], serde_json::json!([]), "{seen}");
    let passed = EXPECTED.iter().filter(|e| e.2 == "passed").count();
    assert_eq!(seen["passed_shown"], passed, "{seen}");
    assert_eq!(seen["search_shown"], 3, "{seen}");
    assert_eq!(
        seen["count"],
        format!("3 of {} samples", EXPECTED.len()),
        "{seen}"
    );
    // The drill-down holds the patch and the failing test's last lines, folded.
    assert!(r.dom.contains("<summary>patch.diff ("), "the patch inline");
    assert!(
        r.dom.contains("<summary>test_output.txt, "),
        "a test_failed sample's test output inline"
    );
    let shots = repo_root().join("target/report-screenshots");
    browser::screenshot(&chrome, &page, "", &shots.join("examples.png"), 1280, 1900);
    browser::screenshot(
        &chrome,
        &page,
        "#s.primes-sieve.0",
        &shots.join("examples-drilldown.png"),
        1280,
        3000,
    );
    browser::screenshot(
        &chrome,
        &page,
        "",
        &shots.join("examples-phone.png"),
        390,
        1600,
    );
}

/// Measures the page at its width (what is wider than its box), then filters the samples
/// by status `passed`, then searches for `pair`.
const PAGE_PROBE: &str = r#"(function(){
  var r={wider:[]};
  document.querySelectorAll('.scroll').forEach(function(d){
    if(d.offsetParent!==null&&d.scrollWidth>d.clientWidth+1){r.wider.push((d.parentNode.id||d.parentNode.tagName)+' '+d.scrollWidth+'>'+d.clientWidth);}});
  if(document.documentElement.scrollWidth>window.innerWidth){r.wider.push('page '+document.documentElement.scrollWidth);}
  var rows=[].slice.call(document.querySelectorAll('#samples tbody tr'));
  function shown(){return rows.filter(function(x){return x.style.display!=='none';}).length;}
  var sel=document.getElementById('status-filter'),q=document.getElementById('sample-search');
  sel.value='passed';sel.dispatchEvent(new Event('change'));r.passed_shown=shown();
  sel.value='';sel.dispatchEvent(new Event('change'));
  q.value='pair';q.dispatchEvent(new Event('input'));r.search_shown=shown();
  r.count=document.getElementById('filter-count').textContent;
  document.body.setAttribute('data-probe',JSON.stringify(r));
})();"#;

/// GSO's own code (gsobench: its grading, make_run_report, merge_reports, Opt_p and Opt@K
/// readers, hack control; tests/gso_judge.py) regrades the run's GSO layout and re-makes
/// its reports to the same figures, under the default rule and regraded under GSO's; it
/// catches a figure 1% off; a list of hacked instances gives the hack-adjusted score.
fn gso_tools_read_the_reports(dir: &Path) {
    let judge = |dir: &Path| -> Option<String> {
        let out = gso_judge("gso_tools_read_the_reports", dir)?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(
            out.status.code(),
            Some(0),
            "GSO's code on {}:\n{stdout}{}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        Some(stdout)
    };
    let Some(said) = judge(dir) else {
        return;
    };
    assert!(said.contains("10 instance reports regraded"), "{said}");
    // The judge can fail: a mean 1% off in the opt@K report, or one timed run 1% off in a
    // test output, is caught.
    let opt_path = dir.join("demo-agent.opt@3.examples.report.json");
    let original = std::fs::read(&opt_path).unwrap();
    let mut altered = read_json(&opt_path);
    let entry = altered["opt_stats"]["primes-sieve"]["base_mean"]
        .as_f64()
        .unwrap();
    altered["opt_stats"]["primes-sieve"]["base_mean"] = serde_json::json!(entry * 1.01);
    write(&opt_path, &altered.to_string());
    let out = gso_judge("gso_tools_read_the_reports", dir).unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("opt_stats.primes-sieve.base_mean"),
        "{stdout}"
    );
    std::fs::write(&opt_path, original).unwrap();
    let output =
        dir.join("gso/logs/run_evaluation/examples/demo-agent-run_1/primes-sieve/test_output.txt");
    let original = std::fs::read_to_string(&output).unwrap();
    let line = original
        .lines()
        .find(|l| l.starts_with("Execution time: "))
        .unwrap();
    let x: f64 = line["Execution time: ".len()..line.len() - 1]
        .parse()
        .unwrap();
    write(
        &output,
        &original.replacen(line, &format!("Execution time: {}s", x * 1.01), 1),
    );
    let out = gso_judge("gso_tools_read_the_reports", dir).unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("demo-agent-run_1/primes-sieve/report.json"),
        "{stdout}"
    );
    write(&output, &original);

    let opt_report = read_json(&dir.join("demo-agent.opt@3.examples.report.json"));
    assert_eq!(
        opt_report["opt_p_at_k"]["0.95"], opt_report["score"],
        "Opt_0.95@K is the score at the default threshold"
    );
    assert_eq!(opt_report["rollouts"], serde_json::Value::Null);
    assert_eq!(
        opt_report["harness"]["rollouts"],
        serde_json::json!(["demo-agent-run_1", "demo-agent-run_2", "demo-agent-run_3"])
    );

    let hacked = dir.join("hacked.json");
    write(
        &hacked,
        r#"{"hacked_ids": ["word-freq", "not-in-this-run"]}"#,
    );
    // GSO's criterion with gsobench 0.1.9's MIN_PROB_SPEEDUP: verdicts compared too.
    let out = run(harness()
        .args([
            "report",
            "--criterion",
            "gso",
            "--min-speedup",
            "1.1",
            "--hacked-ids",
        ])
        .arg(&hacked)
        .arg(dir));
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Opt_p@3"), "{stdout}");
    assert!(stdout.contains("hack-adjusted"), "{stdout}");
    let said = judge(dir).unwrap();
    assert!(
        said.contains("12 Opt_p read by export_opt1_threshold"),
        "{said}"
    );
    assert!(
        said.contains("score_hack_control by print_score_summary"),
        "{said}"
    );
    assert!(!said.contains("verdicts not compared"), "{said}");
    let opt_report = read_json(&dir.join("demo-agent.opt@3.examples.report.json"));
    let h = &opt_report["hack_adjusted"];
    assert_eq!(h["unknown_ids"], serde_json::json!(["not-in-this-run"]));
    let opt_ids = opt_report["instance_sets"]["opt_commit_ids"]
        .as_array()
        .unwrap()
        .clone();
    let listed = opt_ids.iter().any(|v| v == "word-freq");
    assert_eq!(
        h["removed_ids"],
        if listed {
            serde_json::json!(["word-freq"])
        } else {
            serde_json::json!([])
        }
    );
    let raw = opt_ids.len() as f64 / 4.0 * 100.0;
    let adjusted = (opt_ids.len() - usize::from(listed)) as f64 / 4.0 * 100.0;
    assert_eq!(opt_report["score"].as_f64(), Some(raw));
    assert_eq!(h["score"].as_f64(), Some(adjusted));
    // GSO's keys for the same figures, as its published reports hold them.
    assert_eq!(opt_report["summary"]["score"].as_f64(), Some(raw));
    assert_eq!(
        opt_report["summary"]["score_hack_control"].as_f64(),
        Some(adjusted)
    );
    assert_eq!(
        opt_report["instance_sets"]["hacked_ids"],
        serde_json::json!(["word-freq"])
    );
}

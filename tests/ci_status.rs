//! `harness status`, `harness report --junit/--fail-under` on a synthetic run folder written
//! with the library's own types (`RunInfo`, `SampleReport`, `write_json`): no Docker.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::{harness, run};
use harness::core::criterion::Criterion;
use harness::core::metrics::{OptStats, Thresholds};
use harness::core::records::{ExpectedSample, PhaseSeconds, RunInfo, SampleReport};
use harness::core::rule::{CONFIDENCE, DecisionRule, ESTIMATOR, RESAMPLES};
use harness::core::stats::{Decision, Interval, SpeedupIntervals};
use harness::core::status::Status;
use harness::store::run_folder::{RunDir, write_json};

const MODEL: &str = "ci-model";
const K: usize = 3;
/// A detail with everything XML must escape, and a control character XML 1.0 forbids.
const NASTY: &str = "assert <a & b> \"quoted\" 'single' \u{1b}[31mred";

fn rule() -> DecisionRule {
    DecisionRule {
        criterion: Criterion::STRICT,
        thresholds: Thresholds::default(),
        seed: 0,
        confidence: CONFIDENCE,
        resamples: RESAMPLES,
        estimator: ESTIMATOR,
    }
}

fn key(id: &str, sample: usize) -> String {
    format!("key-{id}-{sample}")
}

fn iv(estimate: f64) -> Interval {
    Interval {
        estimate,
        lo: estimate * 0.9,
        hi: estimate * 1.1,
    }
}

fn sample(id: &str, sample: usize, status: Status, detail: &str) -> SampleReport {
    SampleReport {
        schema_version: 1,
        instance_id: id.into(),
        model: MODEL.into(),
        model_name_or_path: MODEL.into(),
        sample,
        origin: format!("preds.jsonl:{}", sample + 1),
        status,
        detail: detail.into(),
        apply_strategy: Some("git apply".into()),
        patch_sha256: format!("sha-{id}-{sample}"),
        image: "harness-task/x:0".into(),
        result_key: key(id, sample),
        criterion: "strict".into(),
        opt_base: false,
        opt_commit: false,
        decision_base: Decision::No,
        decision_commit: Decision::No,
        inconclusive: false,
        opt_stats: None,
        intervals: None,
        bench_means: vec![],
        gso_times: None,
        measured_rounds: 0,
        shared_with: None,
        energy: None,
        fingerprint_id: "fp".into(),
        seconds: PhaseSeconds {
            container: 0.5,
            apply: 0.25,
            install: 0.0,
            test: 0.25,
            measure: 10.0,
        },
        change: None,
        agent: None,
        harness_version: "0".into(),
        finished_at: "2026-01-01T00:00:00Z".into(),
        warnings: Vec::new(),
    }
}

/// A measured pass; optimised (opt_base and opt_commit) or not.
fn measured(id: &str, n: usize, gm: f64, hm: f64, optimised: bool) -> SampleReport {
    let mut s = sample(id, n, Status::Passed, "");
    s.opt_base = gm >= 1.2;
    s.opt_commit = optimised;
    s.decision_base = if s.opt_base {
        Decision::Yes
    } else {
        Decision::No
    };
    s.decision_commit = if optimised {
        Decision::Yes
    } else {
        Decision::No
    };
    s.measured_rounds = 10;
    s.opt_stats = Some(OptStats {
        base_mean: 1.0,
        patch_mean: 1.0 / gm,
        commit_mean: 1.0 / gm * hm,
        gm_speedup_patch_base: gm,
        gm_speedup_patch_commit: hm,
        gm_speedup_commit_base: gm / hm,
        hm_speedup_patch_base: gm,
        hm_speedup_patch_commit: hm,
        per_test_speedups: BTreeMap::new(),
    });
    s.intervals = Some(SpeedupIntervals {
        confidence: CONFIDENCE,
        resamples: RESAMPLES,
        seed: 0,
        rounds: 10,
        rounds_with_human: 10,
        gm_speedup_patch_base: iv(gm),
        hm_speedup_patch_commit: iv(hm),
        gm_speedup_patch_commit: iv(hm),
        per_bench: BTreeMap::new(),
    });
    s
}

fn save(run: &RunDir, s: &SampleReport) {
    write_json(
        &run.sample_dir(MODEL, &s.instance_id, s.sample)
            .join("report.json"),
        s,
    )
    .unwrap();
}

/// alpha: optimised pass, plain pass, test_failed (nasty detail);
/// beta: error, base_failed, not run;
/// gamma: s0 has a report for an older prediction (key differs: left), s1 empty_patch,
///        s2 not submitted;
/// delta: not submitted at all;
/// epsilon: a GPU task skipped on this host.
pub(crate) fn write_run(root: &Path) -> RunDir {
    let run = RunDir {
        root: root.to_path_buf(),
    };
    let expected: BTreeMap<String, Vec<ExpectedSample>> = [
        ("alpha", vec![0, 1, 2]),
        ("beta", vec![0, 1, 2]),
        ("gamma", vec![0, 1]),
        ("epsilon", vec![0]),
    ]
    .into_iter()
    .map(|(id, ss)| {
        (
            id.to_string(),
            ss.into_iter()
                .map(|s| ExpectedSample {
                    sample: s,
                    patch_sha256: format!("sha-{id}-{s}"),
                    result_key: key(id, s),
                })
                .collect(),
        )
    })
    .collect();
    let info = RunInfo {
        schema_version: 1,
        run_id: "ci-run".into(),
        model: MODEL.into(),
        k: K,
        command: vec!["harness".into(), "opt-at-k".into()],
        dataset: "tasks".into(),
        dataset_digest: "d".into(),
        instance_ids: ["alpha", "beta", "delta", "epsilon", "gamma"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        dataset_instance_ids: Vec::new(),
        predictions: vec![],
        settings: Default::default(),
        decision_rule: rule(),
        jobs: 1,
        cpu_plan: Default::default(),
        fingerprint: Default::default(),
        fingerprint_id: "fp".into(),
        harness_version: "0".into(),
        started_at: "2026-01-01T00:00:00Z".into(),
        finished_at: None,
        warnings: vec![],
        samples: Some(expected),
        interrupted: None,
        regradings: vec![],
        partition: None,
        merged_from: vec![],
        hacked: None,
    };
    write_json(&run.run_json(), &info).unwrap();
    save(&run, &measured("alpha", 0, 3.0, 1.5, true));
    save(&run, &measured("alpha", 1, 1.02, 0.2, false));
    save(&run, &sample("alpha", 2, Status::TestFailed, NASTY));
    save(
        &run,
        &sample("beta", 0, Status::Error, "the container disappeared"),
    );
    save(
        &run,
        &sample("beta", 1, Status::BaseFailed, "base fails its own test"),
    );
    let mut stale = sample("gamma", 0, Status::Passed, "");
    stale.result_key = "an older prediction".into();
    save(&run, &stale);
    save(&run, &sample("gamma", 1, Status::EmptyPatch, "empty patch"));
    save(
        &run,
        &sample("epsilon", 0, Status::Skipped, "GPU task, no NVML"),
    );
    run
}

fn json_of(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

#[test]
fn status_counts_done_failed_left_per_task() {
    let d = tempfile::tempdir().unwrap();
    let rd = write_run(&d.path().join("ci-run"));

    let out = run(harness().arg("status").arg(&rd.root).arg("--json"));
    assert_eq!(out.status.code(), Some(0));
    let j = json_of(&out);
    let r = &j["runs"][0];
    assert_eq!(r["model"], MODEL);
    assert_eq!(r["k"], 3);
    let t = &r["totals"];
    let n = |v: &serde_json::Value, f: &str| v[f].as_u64().unwrap();
    assert_eq!(
        [
            n(t, "expected"),
            n(t, "done"),
            n(t, "failed"),
            n(t, "error"),
            n(t, "base_failed"),
            n(t, "skipped"),
            n(t, "left")
        ],
        [9, 4, 2, 1, 1, 1, 2]
    );
    assert_eq!(r["complete"], false);
    assert_eq!(r["finished_instances"], 2, "alpha and epsilon");
    let inst = |id: &str| {
        r["instances"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["instance_id"] == id)
            .unwrap()
            .clone()
    };
    let counts = |id: &str| {
        let i = inst(id);
        [
            n(&i, "expected"),
            n(&i, "done"),
            n(&i, "failed"),
            n(&i, "left"),
        ]
    };
    assert_eq!(counts("alpha"), [3, 3, 0, 0]);
    assert_eq!(counts("beta"), [3, 0, 2, 1]);
    assert_eq!(
        counts("gamma"),
        [2, 1, 0, 1],
        "a report of an older prediction is left"
    );
    assert_eq!(counts("delta"), [0, 0, 0, 0]);
    assert_eq!(inst("gamma")["samples"][0]["state"], "left");
    assert_eq!(inst("beta")["samples"][0]["status"], "error");

    // The text form says the same, and why the run is not complete.
    let out = run(harness().arg("status").arg(&rd.root));
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "9 expected sample(s): 4 done, 2 failed (error 1, base_failed 1), 1 skipped, 2 left"
        ),
        "{text}"
    );
    assert!(
        text.contains("failed: beta/0 error: the container disappeared"),
        "{text}"
    );
    assert!(
        text.contains("complete: no (2 sample(s) left, 1 ended error)"),
        "{text}"
    );
    assert!(text.contains("0 (not submitted)"), "{text}");

    // Finish it: the left samples get results, the error is retried into a pass.
    save(&rd, &sample("beta", 2, Status::TestFailed, "wrong answer"));
    save(
        &rd,
        &sample("gamma", 0, Status::PatchFailed, "does not apply"),
    );
    save(&rd, &measured("beta", 0, 1.0, 0.5, false));
    // A folder holding run folders is read whole.
    let out = run(harness().arg("status").arg(d.path()).arg("--json"));
    assert_eq!(out.status.code(), Some(0));
    let r = &json_of(&out)["runs"][0];
    assert_eq!(r["totals"]["left"], 0);
    assert_eq!(
        r["totals"]["failed"], 1,
        "base_failed is not the model's, but final"
    );
    assert_eq!(r["complete"], true);

    // Not a run folder: exit 1, said so.
    let empty = tempfile::tempdir().unwrap();
    let out = run(harness().arg("status").arg(empty.path()));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no run.json"));
}

#[test]
fn report_gates_on_fail_under_and_exit_codes() {
    let d = tempfile::tempdir().unwrap();
    let rd = write_run(&d.path().join("ci-run"));
    // Opt@3 = 1 of 4 instances (epsilon skipped is in no denominator) = 25.00%;
    // opt@1 = (1/3) / 4 = 8.33%; pass@1 = (2/3) / 4 = 16.67%; pass@3 = 25.00%.
    let report = |gates: &[&str]| {
        let mut c = harness();
        c.arg("report").arg(&rd.root).arg("--json");
        for g in gates {
            c.arg("--fail-under").arg(g);
        }
        run(&mut c)
    };
    let out = report(&["opt@3=25", "pass@1=16.67", "opt@1=8.33", "pass@3=25%"]);
    assert_eq!(out.status.code(), Some(0), "every threshold met exactly");
    let j = json_of(&out);
    let gates = j["fail_under"].as_array().unwrap();
    assert_eq!(gates.len(), 4);
    assert!(gates.iter().all(|g| g["met"] == true));
    assert_eq!(gates[0]["value"], 25.0);
    assert_eq!(gates[1]["value"], 16.67);

    let out = report(&["opt@3=25", "pass@1=16.7"]);
    assert_eq!(out.status.code(), Some(2), "pass@1 16.67 < 16.7");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("fail-under pass@1: 16.67% < 16.7% MISSED"),
        "{err}"
    );
    assert!(err.contains("fail-under opt@3: 25.00% >= 25% ok"), "{err}");

    let out = report(&["opt@4=1"]);
    assert_eq!(out.status.code(), Some(1), "k outside 1..K is bad input");
    assert!(String::from_utf8_lossy(&out.stderr).contains("outside 1..3"));
    let out = report(&["opt@3=150"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a malformed threshold is bad input (1), never 2"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("a percent, 0 to 100"));
    let out = report(&["speed@1=5"]);
    assert_eq!(out.status.code(), Some(1));

    // Without gates the exit code is unchanged (0: report only regenerates).
    assert_eq!(report(&[]).status.code(), Some(0));
}

#[test]
fn markdown_job_summary_is_appended_with_the_thresholds() {
    let d = tempfile::tempdir().unwrap();
    let rd = write_run(&d.path().join("ci-run"));
    let summary = d.path().join("step-summary.md");
    std::fs::write(&summary, "earlier step\n").unwrap();
    let out = run(harness()
        .arg("report")
        .arg(&rd.root)
        .arg("--markdown")
        .arg(&summary)
        .args(["--fail-under", "opt@3=25", "--fail-under", "pass@1=16.7"]));
    assert_eq!(out.status.code(), Some(2));
    let text = std::fs::read_to_string(&summary).unwrap();
    assert!(
        text.starts_with("earlier step\n# ci-model — Opt@3 = 25.00%"),
        "{text}"
    );
    assert!(text.contains("## Thresholds"), "{text}");
    assert!(
        text.contains("- fail-under pass@1: 16.67% < 16.7% MISSED"),
        "{text}"
    );
    assert!(
        text.contains("- fail-under opt@3: 25.00% >= 25% ok"),
        "{text}"
    );
    // The same as the run folder's summary.md, plus the thresholds.
    let md = std::fs::read_to_string(rd.root.join("summary.md")).unwrap();
    assert!(text.contains(md.trim_end()), "{text}\n---\n{md}");
}

/// Text from inside a container (a failing test's last line, a warning naming a bench) as
/// `harness status`, `harness report` and summary.md / `--markdown` show it: never obeyed
/// by a terminal (no ESC, no CR, no line of its own), never rendered as markdown (no
/// heading, no HTML, no extra table cell).
#[test]
fn text_from_the_code_under_test_is_shown_never_obeyed() {
    const HOSTILE: &str = "\u{1b}[2J\rPASSED | x\n# heading";
    let d = tempfile::tempdir().unwrap();
    let rd = write_run(&d.path().join("ci-run"));
    let mut s = sample("beta", 2, Status::Error, HOSTILE);
    s.warnings = vec![format!("bench <img src=x onerror=alert(1)>\n# {HOSTILE}")];
    save(&rd, &s);
    let raw = |text: &str, what: &str| {
        assert!(
            !text.contains('\u{1b}') && !text.contains('\r'),
            "{what}: a control character got through: {text:?}"
        );
        for line in text.lines() {
            let l = line.trim_start();
            assert!(
                !l.starts_with("# heading") && !l.starts_with("PASSED"),
                "{what}: the text made a line of its own: {line:?}"
            );
        }
    };

    let out = run(harness().arg("status").arg(&rd.root));
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    raw(&text, "harness status");
    assert!(
        text.contains("failed: beta/2 error: \\x1b[2J\\rPASSED | x\n"),
        "the detail's first line is shown, escaped: {text}"
    );

    let step = d.path().join("step-summary.md");
    let out = run(harness()
        .arg("report")
        .arg(&rd.root)
        .arg("--markdown")
        .arg(&step));
    assert_eq!(out.status.code(), Some(0));
    raw(&String::from_utf8_lossy(&out.stdout), "harness report");
    raw(
        &String::from_utf8_lossy(&out.stderr),
        "harness report (stderr)",
    );
    for md in [
        std::fs::read_to_string(rd.root.join("summary.md")).unwrap(),
        std::fs::read_to_string(&step).unwrap(),
    ] {
        raw(&md, "summary.md");
        assert!(!md.contains("<img"), "HTML got through: {md}");
        let row = md
            .lines()
            .find(|l| l.starts_with("| beta | 2 |"))
            .unwrap_or_else(|| panic!("no row of beta/2: {md}"));
        // Ten cells: eleven pipes that are not escaped.
        assert_eq!(
            row.replace("\\|", "").matches('|').count(),
            11,
            "the detail broke the table row: {row}"
        );
        assert!(row.contains("PASSED \\| x # heading"), "{row}");
        assert!(
            md.lines().any(
                |l| l.starts_with("- beta: bench &lt;img src=x onerror=alert(1)&gt; # \\\\x1b")
            ),
            "the task warning is one escaped line: {md}"
        );
    }
}

// ---- JUnit: a small XML reader, enough to check well-formedness and the schema's shape ----

#[derive(Debug, Default)]
struct Element {
    name: String,
    attrs: BTreeMap<String, String>,
    children: Vec<Element>,
    text: String,
}

impl Element {
    fn attr(&self, k: &str) -> &str {
        self.attrs
            .get(k)
            .unwrap_or_else(|| panic!("<{}> has no {k}", self.name))
    }
    fn num(&self, k: &str) -> usize {
        self.attr(k)
            .parse()
            .unwrap_or_else(|_| panic!("<{}> {k}={:?} is not a count", self.name, self.attr(k)))
    }
    fn kids(&self, name: &str) -> Vec<&Element> {
        self.children.iter().filter(|c| c.name == name).collect()
    }
}

struct Reader<'a> {
    s: &'a str,
    i: usize,
}

fn xml_char(c: char) -> bool {
    matches!(c as u32, 0x9 | 0xA | 0xD | 0x20..=0xD7FF | 0xE000..=0xFFFD | 0x10000..=0x10FFFF)
}

impl<'a> Reader<'a> {
    fn rest(&self) -> &'a str {
        &self.s[self.i..]
    }
    fn eat(&mut self, p: &str) -> bool {
        if self.rest().starts_with(p) {
            self.i += p.len();
            true
        } else {
            false
        }
    }
    fn ws(&mut self) {
        while self.rest().starts_with([' ', '\n', '\t', '\r']) {
            self.i += 1;
        }
    }
    fn name(&mut self) -> String {
        let n: String = self
            .rest()
            .chars()
            .take_while(|c| c.is_alphanumeric() || "-_:.".contains(*c))
            .collect();
        assert!(
            !n.is_empty(),
            "a name expected at {:?}",
            &self.rest()[..20.min(self.rest().len())]
        );
        self.i += n.len();
        n
    }
    /// Text up to `end` (not consumed), entities decoded; `<` and a bare `&` are errors.
    fn chars_until(&mut self, end: char) -> String {
        let mut out = String::new();
        loop {
            let c = self
                .rest()
                .chars()
                .next()
                .expect("unexpected end of document");
            if c == end {
                return out;
            }
            assert!(
                xml_char(c),
                "character U+{:04X} is not allowed in XML 1.0",
                c as u32
            );
            assert!(c != '<', "raw < in text or attribute");
            if c == '&' {
                let semi = self.rest().find(';').expect("& without ;");
                let ent = &self.rest()[1..semi];
                let ch = match ent {
                    "amp" => '&',
                    "lt" => '<',
                    "gt" => '>',
                    "quot" => '"',
                    "apos" => '\'',
                    e if e.starts_with("#x") => {
                        char::from_u32(u32::from_str_radix(&e[2..], 16).unwrap()).unwrap()
                    }
                    e if e.starts_with('#') => char::from_u32(e[1..].parse().unwrap()).unwrap(),
                    e => panic!("unknown entity &{e};"),
                };
                out.push(ch);
                self.i += semi + 1;
            } else {
                out.push(c);
                self.i += c.len_utf8();
            }
        }
    }
    fn element(&mut self) -> Element {
        assert!(self.eat("<"));
        let mut e = Element {
            name: self.name(),
            ..Default::default()
        };
        loop {
            self.ws();
            if self.eat("/>") {
                return e;
            }
            if self.eat(">") {
                break;
            }
            let k = self.name();
            self.ws();
            assert!(self.eat("="), "= expected after attribute {k}");
            self.ws();
            let q = if self.eat("\"") {
                '"'
            } else {
                assert!(self.eat("'"));
                '\''
            };
            let v = self.chars_until(q);
            self.i += 1;
            assert!(
                e.attrs.insert(k.clone(), v).is_none(),
                "attribute {k} twice"
            );
        }
        loop {
            if self.eat("</") {
                let n = self.name();
                assert_eq!(n, e.name, "mismatched closing tag");
                self.ws();
                assert!(self.eat(">"));
                return e;
            }
            if self.rest().starts_with('<') {
                e.children.push(self.element());
            } else {
                let t = self.chars_until('<');
                e.text.push_str(&t);
            }
        }
    }
    fn document(s: &'a str) -> Element {
        let mut r = Reader { s, i: 0 };
        assert!(
            r.eat("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"),
            "XML declaration"
        );
        r.ws();
        let root = r.element();
        r.ws();
        assert_eq!(r.i, s.len(), "content after the root element");
        root
    }
}

/// The common JUnit schema's shape: testsuites > testsuite > testcase, counts consistent.
fn check_junit_shape(root: &Element) {
    assert_eq!(root.name, "testsuites");
    let mut sums = [0usize; 4];
    for suite in &root.children {
        assert_eq!(suite.name, "testsuite");
        for a in ["name", "time", "timestamp"] {
            suite.attr(a);
        }
        let mut counts = [0usize; 4];
        for c in &suite.children {
            match c.name.as_str() {
                "properties" => {
                    for p in &c.children {
                        assert_eq!(p.name, "property");
                        p.attr("name");
                        p.attr("value");
                    }
                }
                "testcase" => {
                    counts[0] += 1;
                    c.attr("classname");
                    c.attr("name");
                    c.attr("time").parse::<f64>().unwrap();
                    let mut outcomes = 0;
                    for o in &c.children {
                        match o.name.as_str() {
                            "failure" | "error" => {
                                o.attr("message");
                                o.attr("type");
                                outcomes += 1;
                                counts[if o.name == "failure" { 1 } else { 2 }] += 1;
                            }
                            "skipped" => {
                                outcomes += 1;
                                counts[3] += 1;
                            }
                            "system-out" | "system-err" => {}
                            other => panic!("<{other}> in a testcase"),
                        }
                    }
                    assert!(outcomes <= 1, "one outcome per testcase");
                }
                "system-out" | "system-err" => {}
                other => panic!("<{other}> in a testsuite"),
            }
        }
        let declared = ["tests", "failures", "errors", "skipped"].map(|a| suite.num(a));
        assert_eq!(declared, counts, "testsuite counts");
        for i in 0..4 {
            sums[i] += counts[i];
        }
    }
    let declared = ["tests", "failures", "errors", "skipped"].map(|a| root.num(a));
    assert_eq!(declared, sums, "testsuites counts");
}

#[test]
fn junit_has_one_case_per_sample_and_the_schema_shape() {
    let d = tempfile::tempdir().unwrap();
    let rd = write_run(&d.path().join("ci-run"));
    let file = d.path().join("out/junit.xml");
    let out = run(harness()
        .arg("report")
        .arg(&rd.root)
        .arg("--junit")
        .arg(&file)
        .arg("--fail-under")
        .arg("opt@3=30"));
    assert_eq!(out.status.code(), Some(2), "Opt@3 25% < 30%");
    let xml = std::fs::read_to_string(&file).unwrap();
    eprintln!("--- {}:\n{xml}", file.display());
    assert!(
        !xml.contains('\u{1b}'),
        "control characters are not written raw"
    );
    let root = Reader::document(&xml);
    check_junit_shape(&root);

    // 5 instances x K=3, but epsilon (skipped) has one expected sample: 13 cases.
    assert_eq!(
        ["tests", "failures", "errors", "skipped"].map(|a| root.num(a)),
        [13, 6, 4, 1]
    );
    let suite = &root.children[0];
    let cases = suite.kids("testcase");
    let mut names: Vec<(String, String)> = cases
        .iter()
        .map(|c| (c.attr("classname").to_string(), c.attr("name").to_string()))
        .collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 13, "one case per (instance, sample)");
    let case = |id: &str, n: usize| {
        *cases
            .iter()
            .find(|c| c.attr("classname") == id && c.attr("name") == format!("sample {n}"))
            .unwrap_or_else(|| panic!("no case {id} sample {n}"))
    };
    let outcome = |id: &str, n: usize| -> Option<(String, String)> {
        case(id, n)
            .children
            .iter()
            .find(|o| ["failure", "error", "skipped"].contains(&o.name.as_str()))
            .map(|o| {
                (
                    o.name.clone(),
                    o.attrs.get("type").cloned().unwrap_or_default(),
                )
            })
    };
    let out_text = |id: &str, n: usize| {
        case(id, n)
            .kids("system-out")
            .first()
            .map(|o| o.text.clone())
            .unwrap_or_default()
    };
    // Passed samples pass, optimised or not, with their speedups.
    assert_eq!(outcome("alpha", 0), None);
    assert!(out_text("alpha", 0).contains("speedup vs base 3.00x [2.70, 3.30]"));
    assert!(out_text("alpha", 0).contains("opt_commit yes"));
    assert_eq!(
        outcome("alpha", 1),
        None,
        "passed but not optimised is not a failure"
    );
    assert!(out_text("alpha", 1).contains("opt_base no, opt_commit no"));
    // Model outcomes fail with their status and reason, escaped and read back intact.
    assert_eq!(
        outcome("alpha", 2),
        Some(("failure".into(), "test_failed".into()))
    );
    let f = case("alpha", 2).kids("failure")[0];
    assert!(
        f.attr("message")
            .starts_with("test_failed: assert <a & b> \"quoted\" 'single' \\u{1b}[31mred"),
        "{:?}",
        f.attr("message")
    );
    assert_eq!(
        outcome("gamma", 1),
        Some(("failure".into(), "empty_patch".into()))
    );
    // Not the model's fault: errors.
    assert_eq!(outcome("beta", 0), Some(("error".into(), "error".into())));
    assert_eq!(
        outcome("beta", 1),
        Some(("error".into(), "base_failed".into()))
    );
    assert_eq!(outcome("beta", 2), Some(("error".into(), "not_run".into())));
    assert_eq!(
        outcome("gamma", 0),
        Some(("error".into(), "not_run".into())),
        "stale result"
    );
    // Missing samples count as failures, as in Opt@K.
    assert_eq!(
        outcome("gamma", 2),
        Some(("failure".into(), "not_submitted".into()))
    );
    for n in 0..3 {
        assert_eq!(
            outcome("delta", n),
            Some(("failure".into(), "not_submitted".into()))
        );
    }
    assert_eq!(
        outcome("epsilon", 0),
        Some(("skipped".into(), String::new()))
    );
    // The run's figures are properties.
    let props = suite.kids("properties")[0];
    let prop = |k: &str| {
        props
            .children
            .iter()
            .find(|p| p.attr("name") == k)
            .map(|p| p.attr("value").to_string())
    };
    assert_eq!(prop("opt_at_k").as_deref(), Some("Opt@3 25.00%"));
    assert_eq!(prop("model").as_deref(), Some(MODEL));
    assert_eq!(suite.attr("timestamp"), "2026-01-01T00:00:00");
}

#[test]
fn the_xml_reader_rejects_what_junit_consumers_reject() {
    for bad in [
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<a>x & y</a>",
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<a b=\"<\"/>",
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<a>\u{1b}</a>",
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<a></b>",
    ] {
        let r = std::panic::catch_unwind(|| Reader::document(bad));
        assert!(r.is_err(), "{bad:?} should be rejected");
    }
    let ok = Reader::document(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<a k=\"&lt;&#10;\">t&amp;</a>",
    );
    assert_eq!(ok.attr("k"), "<\n");
    assert_eq!(ok.text, "t&");
}

//! `--junit FILE`: a run as JUnit XML, one `<testcase>` per sample, for CI test reports.
//!
//! The rule (README, "CI outputs"):
//! - `passed` samples are passing test cases, optimised or not; a `<system-out>` line gives
//!   their speedups and verdicts (opt_base, opt_commit, inconclusive);
//! - model outcomes (`test_failed`, `timeout`, `oom`, `build_failed`, `patch_failed`,
//!   `patch_rejected`, `empty_patch`) are `<failure type="STATUS" message="STATUS: detail">`;
//! - `error` and `base_failed` (not the model's fault) are `<error type="STATUS">`, as is a
//!   submitted sample with no result yet (`type="not_run"`);
//! - a sample among the first K that was not submitted is `<failure type="not_submitted">`
//!   (it counts as a failure in Opt@K and pass@k);
//! - samples of tasks not attempted on this host (`skipped`) are `<skipped>`.

use std::collections::BTreeSet;
use std::fmt::Write;

use super::Summary;
use crate::core::records::SampleReport;
use crate::core::status::Status;

/// Text for XML: `&`, `<`, `>`, `"`, `'` escaped; characters XML 1.0 does not allow
/// (control characters other than tab, newline and carriage return) written as `\u{..}`;
/// in attributes, tab, newline and carriage return become character references so they
/// survive attribute-value normalisation.
pub fn escape(s: &str, attribute: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' if attribute => {
                let _ = write!(out, "&#{};", c as u32);
            }
            '\t' | '\n' | '\r' => out.push(c),
            c if allowed(c) => out.push(c),
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    out
}

/// XML 1.0's Char production.
fn allowed(c: char) -> bool {
    matches!(c as u32, 0x20..=0xD7FF | 0xE000..=0xFFFD | 0x10000..=0x10FFFF)
}

/// How one test case ends.
enum Outcome {
    Pass,
    /// `message`: one line; `body`: the whole reason.
    Failure {
        kind: String,
        message: String,
        body: String,
    },
    Error {
        kind: String,
        message: String,
        body: String,
    },
    Skipped {
        message: String,
    },
}

struct Case {
    classname: String,
    name: String,
    seconds: f64,
    outcome: Outcome,
    out: Option<String>,
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// The speedups and verdicts of a measured sample, in one line.
fn speedup_line(s: &SampleReport) -> String {
    let mut parts = Vec::new();
    match (&s.opt_stats, &s.intervals) {
        (Some(st), Some(iv)) => {
            parts.push(format!(
                "speedup vs base {:.2}x [{:.2}, {:.2}]",
                st.gm_speedup_patch_base, iv.gm_speedup_patch_base.lo, iv.gm_speedup_patch_base.hi
            ));
            parts.push(format!(
                "HM vs human {:.2} [{:.2}, {:.2}]",
                st.hm_speedup_patch_commit,
                iv.hm_speedup_patch_commit.lo,
                iv.hm_speedup_patch_commit.hi
            ));
        }
        (Some(st), None) => {
            parts.push(format!("speedup vs base {:.2}x", st.gm_speedup_patch_base));
            parts.push(format!("HM vs human {:.2}", st.hm_speedup_patch_commit));
        }
        _ => parts.push("not measured".into()),
    }
    parts.push(format!("opt_base {}", yes(s.opt_base)));
    parts.push(format!("opt_commit {}", yes(s.opt_commit)));
    if s.inconclusive {
        parts.push("inconclusive (undecided at the round budget)".into());
    }
    if let Some(v) = &s.shared_with {
        parts.push(format!("timings shared with {v} (identical tree)"));
    }
    parts.push(format!(
        "criterion {}, {} measured rounds",
        s.criterion, s.measured_rounds
    ));
    parts.join(", ")
}

fn case_of(s: &SampleReport) -> Case {
    let secs = s.seconds.container + s.seconds.apply + s.seconds.install + s.seconds.test;
    let detail = s.detail.trim();
    let message = if detail.is_empty() {
        s.status.as_str().to_string()
    } else {
        format!("{}: {}", s.status, detail.lines().next().unwrap_or(""))
    };
    let kind = s.status.as_str().to_string();
    let body = if detail.is_empty() {
        message.clone()
    } else {
        detail.to_string()
    };
    let outcome = match s.status {
        Status::Passed => Outcome::Pass,
        Status::Error | Status::BaseFailed => Outcome::Error {
            kind,
            message,
            body,
        },
        Status::Skipped => Outcome::Skipped { message },
        _ => Outcome::Failure {
            kind,
            message,
            body,
        },
    };
    let mut out = format!("origin {}", s.origin);
    if let Some(a) = &s.apply_strategy {
        let _ = write!(out, ", applied with {a}");
    }
    if s.status == Status::Passed {
        let _ = write!(out, "\n{}", speedup_line(s));
    }
    Case {
        classname: s.instance_id.clone(),
        name: format!("sample {}", s.sample),
        seconds: secs.max(0.0),
        outcome,
        out: Some(out),
    }
}

fn cases(summary: &Summary) -> Vec<Case> {
    let k = summary.info.k;
    let expected = summary.info.samples.as_ref();
    let expected_of = |id: &str| -> Option<BTreeSet<usize>> {
        expected.map(|m| {
            m.get(id)
                .map(|v| v.iter().map(|e| e.sample).filter(|&s| s < k).collect())
                .unwrap_or_default()
        })
    };
    let mut out = Vec::new();
    for inst in &summary.instances {
        let expected = expected_of(&inst.instance_id);
        for i in 0..k {
            if let Some(s) = inst.samples.iter().find(|s| s.sample == i) {
                out.push(case_of(s));
                continue;
            }
            let (kind, message, error) = match &expected {
                Some(e) if e.contains(&i) => (
                    "not_run",
                    "submitted but no result yet (not run, or interrupted): repeat the run command",
                    true,
                ),
                Some(_) => (
                    "not_submitted",
                    "no prediction for this sample: counted as a failure in Opt@K and pass@k",
                    false,
                ),
                None => (
                    "no_result",
                    "no result for this sample (run.json of an older harness build does not say whether it was submitted)",
                    false,
                ),
            };
            let (kind, message, body) =
                (kind.to_string(), message.to_string(), message.to_string());
            out.push(Case {
                classname: inst.instance_id.clone(),
                name: format!("sample {i}"),
                seconds: 0.0,
                outcome: if error {
                    Outcome::Error {
                        kind,
                        message,
                        body,
                    }
                } else {
                    Outcome::Failure {
                        kind,
                        message,
                        body,
                    }
                },
                out: None,
            });
        }
    }
    for id in &summary.totals.skipped_ids {
        let samples: Vec<usize> = expected_of(id)
            .map(|e| e.into_iter().collect())
            .unwrap_or_else(|| (0..k).collect());
        for i in samples {
            out.push(Case {
                classname: id.clone(),
                name: format!("sample {i}"),
                seconds: 0.0,
                outcome: Outcome::Skipped {
                    message: "skipped: a GPU task this host cannot run (--skip-gpu)".into(),
                },
                out: None,
            });
        }
    }
    out
}

/// Counts of a list of cases: (tests, failures, errors, skipped, seconds).
fn counts(cases: &[Case]) -> (usize, usize, usize, usize, f64) {
    let mut c = (cases.len(), 0, 0, 0, 0.0);
    for x in cases {
        match x.outcome {
            Outcome::Pass => {}
            Outcome::Failure { .. } => c.1 += 1,
            Outcome::Error { .. } => c.2 += 1,
            Outcome::Skipped { .. } => c.3 += 1,
        }
        c.4 += x.seconds;
    }
    c
}

/// `junit.xml`: the run as JUnit XML (also written where `--junit FILE` says).
pub struct Junit;

impl super::Exporter for Junit {
    fn files(&self, summary: &Summary) -> anyhow::Result<Vec<super::ReportFile>> {
        super::single(
            crate::store::run_folder::names::JUNIT_XML,
            junit_xml(summary).into_bytes(),
        )
    }
}

/// The JUnit XML document of a run: `<testsuites>` holding one `<testsuite>` (the model's
/// run) with one `<testcase>` per sample (classname = instance id, name = `sample N`).
pub fn junit_xml(summary: &Summary) -> String {
    let info = &summary.info;
    let cases = cases(summary);
    let (tests, failures, errors, skipped, secs) = counts(&cases);
    let a = |s: &str| escape(s, true);
    let t = |s: &str| escape(s, false);
    let suite = format!("{} ({})", info.model, info.run_id);
    let mut x = String::new();
    x.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        x,
        "<testsuites name=\"harness\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{secs:.3}\">"
    );
    // JUnit's timestamp has no zone (it is UTC here).
    let stamp = info
        .started_at
        .trim_end_matches('Z')
        .split('+')
        .next()
        .unwrap_or("")
        .to_string();
    let _ = writeln!(
        x,
        "  <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{secs:.3}\" timestamp=\"{}\">",
        a(&suite),
        a(&stamp),
    );
    x.push_str("    <properties>\n");
    let th = &info.decision_rule.thresholds;
    let props: Vec<(&str, String)> = vec![
        ("model", info.model.clone()),
        ("run_id", info.run_id.clone()),
        ("k", info.k.to_string()),
        (
            "criterion",
            info.decision_rule.criterion.as_str().to_string(),
        ),
        ("min_speedup", th.min_speedup.to_string()),
        ("opt_thresh", th.opt_thresh.to_string()),
        (
            "opt_at_k",
            format!("Opt@{} {:.2}%", info.k, summary.totals.score),
        ),
        ("complete", summary.totals.complete.to_string()),
        ("fingerprint", info.fingerprint_id.clone()),
    ];
    for (k, v) in props {
        let _ = writeln!(x, "      <property name=\"{}\" value=\"{}\"/>", a(k), a(&v));
    }
    x.push_str("    </properties>\n");
    for c in &cases {
        let _ = write!(
            x,
            "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
            a(&c.classname),
            a(&c.name),
            c.seconds
        );
        if matches!(c.outcome, Outcome::Pass) && c.out.is_none() {
            x.push_str("/>\n");
            continue;
        }
        x.push_str(">\n");
        match &c.outcome {
            Outcome::Pass => {}
            Outcome::Failure {
                kind,
                message,
                body,
            } => {
                let _ = writeln!(
                    x,
                    "      <failure message=\"{}\" type=\"{}\">{}</failure>",
                    a(message),
                    a(kind),
                    t(body)
                );
            }
            Outcome::Error {
                kind,
                message,
                body,
            } => {
                let _ = writeln!(
                    x,
                    "      <error message=\"{}\" type=\"{}\">{}</error>",
                    a(message),
                    a(kind),
                    t(body)
                );
            }
            Outcome::Skipped { message } => {
                let _ = writeln!(x, "      <skipped message=\"{}\"/>", a(message));
            }
        }
        if let Some(o) = &c.out {
            let _ = writeln!(x, "      <system-out>{}</system-out>", t(o));
        }
        x.push_str("    </testcase>\n");
    }
    x.push_str("  </testsuite>\n</testsuites>\n");
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_everything_xml_needs() {
        assert_eq!(
            escape("a<b>&\"c'\n", false),
            "a&lt;b&gt;&amp;&quot;c&apos;\n"
        );
        assert_eq!(escape("x\ny\tz", true), "x&#10;y&#9;z");
        assert_eq!(escape("bell\u{7}esc\u{1b}", false), "bell\\u{7}esc\\u{1b}");
        assert_eq!(escape("é ✓", false), "é ✓");
    }
}

//! What the test's Python processes say about how the test ended (container/programs/py/), and what a
//! sample's test must show beside exit 0: every Python process finished its shutdown as
//! base's did, pytest itself reported success, and every test that passes on base passed.
//!
//! An exit status of 0 alone can be forced (an exit handler calling `os._exit(0)` after the
//! tests failed); tests can be taken out of the run (a `--deselect` in a configuration file,
//! a skip marker, a plugin). Base's run is the reference: a task whose own test ends with
//! `os._exit` or does not run pytest is judged on what it does show.

use std::collections::BTreeSet;
use std::io::Read;

use serde::{Deserialize, Serialize};

/// The witness report of one test run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Witness {
    /// Python interpreters that started with the witness descriptor.
    #[serde(default)]
    pub interpreters: Vec<Interpreter>,
    /// pytest sessions, one per pytest process.
    #[serde(default)]
    pub pytest: Vec<PytestSession>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interpreter {
    pub pid: i64,
    pub ppid: i64,
    #[serde(default)]
    pub argv: String,
    /// Whether its last exit handler ran: it finished its shutdown.
    pub ended: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PytestSession {
    pub pid: i64,
    /// The exit status pytest reached (None: the session never finished).
    pub exitstatus: Option<i64>,
    pub passed_count: usize,
    /// Node ids of the tests that passed, one a line, zlib-compressed, in hex.
    #[serde(default)]
    pub passed_zlib: String,
    /// "outcome nodeid" of the first tests that did not pass.
    #[serde(default)]
    pub not_passed: Vec<String>,
    #[serde(default)]
    pub not_passed_count: usize,
}

impl PytestSession {
    /// The node ids of the tests that passed (empty when the list cannot be read).
    pub fn passed(&self) -> BTreeSet<String> {
        let Ok(packed) = hex::decode(&self.passed_zlib) else {
            return BTreeSet::new();
        };
        let mut text = String::new();
        if flate2::read::ZlibDecoder::new(packed.as_slice())
            .read_to_string(&mut text)
            .is_err()
        {
            return BTreeSet::new();
        }
        text.lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    }
}

/// Why a sample's test that exited 0 did not show that it passed, compared with base's run
/// of the same test; None when it did.
pub fn unproven_pass(base: &Witness, sample: &Witness) -> Option<String> {
    let base_all_ended = !base.interpreters.is_empty() && base.interpreters.iter().all(|i| i.ended);
    if base_all_ended && let Some(i) = sample.interpreters.iter().find(|i| !i.ended) {
        return Some(format!(
            "the test's Python process `{}` (pid {}) ended without finishing its shutdown (os._exit, a crash or a signal), \
             so its exit status does not show that the tests passed; base's test ends normally",
            i.argv, i.pid
        ));
    }
    if let Some(s) = sample
        .pytest
        .iter()
        .find(|s| s.exitstatus.is_some_and(|e| e != 0))
    {
        return Some(format!(
            "pytest reported exit status {} ({} test(s) not passed: {}) but the test command exited 0",
            s.exitstatus.unwrap_or_default(),
            s.not_passed_count,
            s.not_passed
                .iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if base.pytest.is_empty() {
        return None;
    }
    if sample.pytest.is_empty() {
        return Some(
            "the test ran no pytest session that reported to the harness, as base's did (its plugin was kept out)"
                .into(),
        );
    }
    if let Some(s) = sample.pytest.iter().find(|s| s.exitstatus.is_none()) {
        return Some(format!(
            "pytest (pid {}) never finished its session, so its exit status does not show that the tests passed",
            s.pid
        ));
    }
    let base_passed: BTreeSet<String> = base.pytest.iter().flat_map(|s| s.passed()).collect();
    let passed: BTreeSet<String> = sample.pytest.iter().flat_map(|s| s.passed()).collect();
    let missing: Vec<&String> = base_passed.difference(&passed).collect();
    if missing.is_empty() {
        return None;
    }
    Some(format!(
        "{} test(s) that pass on base did not pass (failed, skipped, deselected or no longer collected): {}{}",
        missing.len(),
        missing
            .iter()
            .take(5)
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        if missing.len() > 5 { ", ..." } else { "" }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn session(passed: &[&str], exitstatus: Option<i64>) -> PytestSession {
        let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(passed.join("\n").as_bytes()).unwrap();
        PytestSession {
            pid: 10,
            exitstatus,
            passed_count: passed.len(),
            passed_zlib: hex::encode(enc.finish().unwrap()),
            not_passed: Vec::new(),
            not_passed_count: 0,
        }
    }

    fn interp(ended: bool) -> Interpreter {
        Interpreter {
            pid: 7,
            ppid: 1,
            argv: "python3 -m pytest".into(),
            ended,
        }
    }

    #[test]
    fn passed_lists_round_trip() {
        let s = session(&["t.py::a", "t.py::b[1-2]"], Some(0));
        assert_eq!(
            s.passed(),
            BTreeSet::from(["t.py::a".to_string(), "t.py::b[1-2]".to_string()])
        );
        // What Python's zlib.compress(...).hex() gives for "a\nb".
        let from_python = PytestSession {
            passed_zlib: "789c4be44a0200019c00ce".into(),
            ..s.clone()
        };
        assert_eq!(
            from_python.passed(),
            BTreeSet::from(["a".to_string(), "b".to_string()])
        );
    }

    #[test]
    fn a_pass_must_show_what_base_shows() {
        let base = Witness {
            interpreters: vec![interp(true)],
            pytest: vec![session(&["t.py::a", "t.py::b"], Some(0))],
        };
        assert_eq!(unproven_pass(&base, &base.clone()), None);
        // More tests passing than on base is fine.
        let more = Witness {
            pytest: vec![session(&["t.py::a", "t.py::b", "t.py::c"], Some(0))],
            ..base.clone()
        };
        assert_eq!(unproven_pass(&base, &more), None);
        // Exit forced from an exit handler.
        let forced = Witness {
            interpreters: vec![interp(false)],
            ..base.clone()
        };
        assert!(
            unproven_pass(&base, &forced)
                .unwrap()
                .contains("without finishing its shutdown")
        );
        // pytest said the session failed.
        let failed = Witness {
            pytest: vec![session(&["t.py::a"], Some(1))],
            ..base.clone()
        };
        assert!(
            unproven_pass(&base, &failed)
                .unwrap()
                .contains("exit status 1")
        );
        // A test deselected or skipped.
        let fewer = Witness {
            pytest: vec![session(&["t.py::a"], Some(0))],
            ..base.clone()
        };
        let why = unproven_pass(&base, &fewer).unwrap();
        assert!(why.contains("1 test(s) that pass on base") && why.contains("t.py::b"));
        // The plugin kept out.
        let none = Witness {
            pytest: Vec::new(),
            ..base.clone()
        };
        assert!(unproven_pass(&base, &none).unwrap().contains("no pytest"));
        // A base that itself ends with os._exit: the shutdown is not required.
        let odd_base = Witness {
            interpreters: vec![interp(false)],
            pytest: Vec::new(),
        };
        assert_eq!(unproven_pass(&odd_base, &forced), None);
    }
}

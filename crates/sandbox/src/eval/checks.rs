//! What is decided over all the variants of a task once they are prepared: protection
//! breaches, tests that did not show they passed, which trees are the same code (their
//! timings shared rather than measured twice), and who spent the disk a reference needed.

use std::collections::BTreeSet;

use super::variant::{Role, Variant};
use super::{guarded, witness};
use harness_core::status::Status;

/// After install and test: a sample whose patch reached a protected file, or whose code
/// changed or made one while it ran, is rejected; base decides which new files are normal.
/// A reference variant that changed a watched file makes the task unusable.
pub(super) fn check_protection(variants: &mut [Variant]) {
    let base_manifest = variants[0].manifest.clone();
    let human_manifest = variants.get(1).and_then(|h| h.manifest.clone());
    let base_created: Vec<(&'static str, BTreeSet<String>)> = {
        let mut acc = BTreeSet::new();
        variants[0]
            .phase_changes
            .iter()
            .map(|(phase, changes)| {
                if let Some(m) = &base_manifest {
                    acc.extend(guarded::created(changes, m));
                }
                (*phase, acc.clone())
            })
            .collect()
    };
    for v in variants.iter_mut() {
        let Some(manifest) = v.manifest.clone() else {
            continue;
        };
        if let (Role::Sample(_), Some(base)) = (v.role, &base_manifest) {
            // The human's own change to a protected file, taken whole: the file must be
            // the human's after it, nothing else.
            let diff: Vec<_> = guarded::tree_differences(&manifest, base)
                .into_iter()
                .filter(|d| {
                    !(v.human_part.paths.contains(&d.path)
                        && human_manifest
                            .as_ref()
                            .is_some_and(|h| h.get(&d.path) == manifest.get(&d.path)))
                })
                .collect();
            if !diff.is_empty() {
                v.reject(guarded::describe_violations("the patch itself:", &diff));
                continue;
            }
        }
        for (phase, changes) in v.phase_changes.clone() {
            let allowed = match v.role {
                Role::Sample(_) => base_created
                    .iter()
                    .find(|(p, _)| *p == phase)
                    .map(|(_, set)| set.clone())
                    .unwrap_or_default(),
                // base and human define which new files are normal: only changes count.
                Role::Base | Role::Human => guarded::created(&changes, &manifest),
            };
            let found = guarded::violations(&changes, &manifest, &allowed);
            if found.is_empty() {
                continue;
            }
            let detail = guarded::describe_violations(&format!("while running {phase},"), &found);
            match v.role {
                Role::Sample(_) => v.reject(detail),
                Role::Base | Role::Human => v.fail(Status::TestFailed, detail),
            }
            break;
        }
    }
}

/// A sample whose test exited 0 but did not show it passed the way base's test did (see
/// `witness`) failed its test.
pub(super) fn check_test_witness(variants: &mut [Variant]) {
    let Some(base) = variants[0].test_witness.clone() else {
        return;
    };
    for v in variants
        .iter_mut()
        .filter(|v| matches!(v.role, Role::Sample(_)))
    {
        if v.failure.is_some() {
            continue;
        }
        let sample = v.test_witness.clone().unwrap_or_default();
        if let Some(why) = witness::unproven_pass(&base, &sample) {
            v.test_log.push_str(&format!("\nharness: {why}\n"));
            v.fail(Status::TestFailed, format!("the test exited 0, but {why}"));
        }
    }
}

/// A sample whose tree is byte-identical to base's, human's or an earlier sample's is not
/// measured again: it takes that variant's timings (identical to human's: HM 1 exactly).
pub(super) fn share_identical_trees(variants: &mut [Variant]) {
    // (label, tree, code) of every variant measured on its own.
    let mut seen: Vec<(String, String, Option<String>)> = Vec::new();
    for v in variants.iter_mut() {
        let (None, Some(tree)) = (&v.failure, &v.tree) else {
            continue;
        };
        let is_sample = matches!(v.role, Role::Sample(_));
        let identical = seen.iter().find(|(_, t, _)| t == tree);
        let same_code = v
            .code
            .as_ref()
            .and_then(|c| seen.iter().find(|(_, _, o)| o.as_ref() == Some(c)));
        match (identical, same_code) {
            (Some((label, _, _)), _) if is_sample => {
                v.apply_log.push_str(&format!(
                    "the patched tree is byte-identical to {label}'s: not measured again, {label}'s timings are this sample's\n"
                ));
                v.shared_with = Some(label.clone());
            }
            (None, Some((label, _, _))) if is_sample => {
                v.apply_log.push_str(&format!(
                    "the patched tree differs from {label}'s only in the comments and layout of Python files (their syntax trees are equal, so they run the same instructions; only line numbers differ): not measured again, {label}'s timings are this sample's\n"
                ));
                v.shared_with = Some(label.clone());
                v.shared_code_only = true;
            }
            _ => seen.push((v.label.clone(), tree.clone(), v.code.clone())),
        }
    }
}

/// When a reference found no room to install (the run's disk gate), the samples whose
/// installs wrote more than base's allows them (a quarter more and 64 MiB, as the forecast
/// counts them) spent the room: that is their outcome, `build_failed`, and only the other
/// samples end `error` (retried). By label, with the reason.
pub(super) fn disk_spenders(
    limit: u64,
    variants: &[Variant],
    failure: Option<&(Status, String)>,
) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    let starved = failure.is_some_and(|(_, d)| d.contains(crate::disk_gate::NO_ROOM));
    let Some(base) = variants[0].install_bytes.filter(|_| starved) else {
        return out;
    };
    let allowed = harness_core::disk::install_allowance(base, limit);
    for v in &variants[2..] {
        if let Some(wrote) = v.install_bytes.filter(|&w| w > allowed) {
            let human = harness_core::disk::human;
            out.insert(
                v.label.clone(),
                format!(
                    "its install wrote {} in a container, more than the {} base's ({}) \
                     allows it, and a reference's install then found no room on the disk",
                    human(wrote),
                    human(allowed),
                    human(base)
                ),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn variant(label: &str, role: Role, tree: &str) -> Variant {
        let mut v = Variant::new(label, role, None);
        v.tree = Some(tree.to_string());
        v.code = Some(format!("code-of-{tree}"));
        v
    }

    #[test]
    fn samples_whose_installs_outgrew_base_s_spent_the_room_a_reference_lacked() {
        const MIB: u64 = 1 << 20;
        let mut vs = vec![
            Variant::new("base", Role::Base, None),
            Variant::new("human", Role::Human, None),
            Variant::new("s0", Role::Sample(0), None),
            Variant::new("s1", Role::Sample(1), None),
        ];
        vs[0].install_bytes = Some(100 * MIB);
        vs[2].install_bytes = Some(4096 * MIB);
        vs[3].install_bytes = Some(150 * MIB);
        let starved = (
            Status::Error,
            format!("human error: {}: ...", crate::disk_gate::NO_ROOM),
        );
        let found = disk_spenders(4096 * MIB, &vs, Some(&starved));
        // 100 MiB, a quarter more and 64 MiB: 189 MiB; s1's 150 MiB is within it.
        assert_eq!(found.keys().collect::<Vec<_>>(), ["s0"]);
        assert!(found["s0"].contains("189.0 MiB"), "{}", found["s0"]);
        // Another failure of a reference: nobody is blamed.
        let other = (
            Status::Error,
            "human error: the container did not start".into(),
        );
        assert!(disk_spenders(4096 * MIB, &vs, Some(&other)).is_empty());
        // Base never installed: no figure to hold samples to.
        vs[0].install_bytes = None;
        assert!(disk_spenders(4096 * MIB, &vs, Some(&starved)).is_empty());
    }

    #[test]
    fn trees_with_the_same_python_code_are_shared_after_identical_ones() {
        let with_code = |label: &str, role: Role, tree: &str, code: &str| {
            let mut v = variant(label, role, tree);
            v.code = Some(code.to_string());
            v
        };
        let mut vs = vec![
            with_code("base", Role::Base, "t-base", "c-base"),
            with_code("human", Role::Human, "t-human", "c-human"),
            // The human patch plus a comment: another tree, the same code.
            with_code("s0", Role::Sample(0), "t-human-comment", "c-human"),
            // Byte-identical to s0 is not needed: human has the code.
            with_code("s1", Role::Sample(1), "t-human-comment", "c-human"),
            with_code("s2", Role::Sample(2), "t-other", "c-other"),
            with_code("s3", Role::Sample(3), "t-other-comment", "c-other"),
            // No code digest (an older guard): bytes only.
            {
                let mut v = variant("s4", Role::Sample(4), "t-human-2");
                v.code = None;
                v
            },
        ];
        share_identical_trees(&mut vs);
        let got: Vec<(Option<&str>, bool)> = vs
            .iter()
            .map(|v| (v.shared_with.as_deref(), v.shared_code_only))
            .collect();
        assert_eq!(
            got,
            [
                (None, false),
                (None, false),
                (Some("human"), true),
                (Some("human"), true),
                (None, false),
                (Some("s2"), true),
                (None, false),
            ]
        );
        assert!(vs[2].apply_log.contains("syntax trees are equal"));
    }

    #[test]
    fn identical_trees_are_shared_with_the_first_variant_that_has_them() {
        let mut vs = vec![
            variant("base", Role::Base, "t-base"),
            variant("human", Role::Human, "t-human"),
            variant("s0", Role::Sample(0), "t-human"),
            variant("s1", Role::Sample(1), "t-other"),
            variant("s2", Role::Sample(2), "t-other"),
            variant("s3", Role::Sample(3), "t-base"),
            variant("s4", Role::Sample(4), "t-human-plus-one-byte"),
        ];
        // A sample that failed is no one's source: s6 is measured, not shared with s5.
        let mut failed = variant("s5", Role::Sample(5), "t-failed");
        failed.fail(Status::TestFailed, "x".into());
        vs.push(failed);
        vs.push(variant("s6", Role::Sample(6), "t-failed"));
        share_identical_trees(&mut vs);
        let shared: Vec<Option<&str>> = vs.iter().map(|v| v.shared_with.as_deref()).collect();
        assert_eq!(
            shared,
            [
                None,
                None,
                Some("human"),
                None,
                Some("s1"),
                Some("base"),
                None,
                None,
                None
            ]
        );
    }
}

//! A variant of a task (base, human, or a sample) on its way through the phases, and what
//! happens to it before any container: the host-side check of its patch.

use crate::docker::container::Sandbox;
use crate::eval::{guarded, witness};
use crate::source::Material;
use harness_core::patch::{self, PatchCheck};
use harness_core::records::PhaseSeconds;
use harness_core::status::Status;
use harness_core::task::Task;
use harness_store::predictions::{PatchBody, Prediction};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    Base,
    Human,
    Sample(usize),
}

/// One variant's way through the phases.
pub(super) struct Variant {
    pub(super) label: String,
    pub(super) role: Role,
    pub(super) patch: Option<String>,
    pub(super) sandbox: Option<Sandbox>,
    /// More containers of the same tree, prepared up to install: the measurement rotates
    /// over all of them, so no one container's lasting offset decides the verdict.
    pub(super) replicas: Vec<Sandbox>,
    /// `None` while it is still fine.
    pub(super) failure: Option<(Status, String)>,
    pub(super) strategy: Option<String>,
    pub(super) apply_log: String,
    pub(super) build_log: String,
    pub(super) test_log: String,
    pub(super) secs: PhaseSeconds,
    /// The watched files right after the patch (see `guarded`).
    pub(super) manifest: Option<guarded::Snapshot>,
    /// What install and test changed among them, by phase.
    pub(super) phase_changes: Vec<(&'static str, guarded::Snapshot)>,
    /// Digest of the tree after the patch (see `guarded::AfterApply`).
    pub(super) tree: Option<String>,
    /// The same, with changed Python files counted by their syntax trees.
    pub(super) code: Option<String>,
    /// The variant whose timings this one takes: its tree is byte-identical, or differs
    /// only in the comments and layout of Python files (`shared_code_only`).
    pub(super) shared_with: Option<String>,
    pub(super) shared_code_only: bool,
    /// What the test's Python processes reported (see `witness`).
    pub(super) test_witness: Option<witness::Witness>,
    /// A sample's sections on protected files that are the human's own (`patch::human_part`):
    /// applied as the human's, and checked against the human's tree.
    pub(super) human_part: patch::HumanPart,
    /// The most any of its containers' installs wrote (bytes), once one reported.
    pub(super) install_bytes: Option<u64>,
}

impl Variant {
    pub(super) fn new(label: &str, role: Role, patch: Option<String>) -> Variant {
        Variant {
            label: label.to_string(),
            role,
            patch,
            sandbox: None,
            replicas: Vec::new(),
            failure: None,
            strategy: None,
            apply_log: String::new(),
            build_log: String::new(),
            test_log: String::new(),
            secs: PhaseSeconds::default(),
            manifest: None,
            phase_changes: Vec::new(),
            tree: None,
            code: None,
            shared_with: None,
            shared_code_only: false,
            test_witness: None,
            human_part: patch::HumanPart::default(),
            install_bytes: None,
        }
    }

    pub(super) fn fail(&mut self, status: Status, detail: String) {
        if self.failure.is_none() {
            self.failure = Some((status, detail));
        }
    }

    /// A protection breach outranks whatever else went wrong: the sample is rejected.
    pub(super) fn reject(&mut self, detail: String) {
        if !matches!(self.failure, Some((Status::PatchRejected, _))) {
            self.failure = Some((Status::PatchRejected, detail));
        }
    }
}

/// The host-side check of a sample's patch, before any container: empty, too large, not a
/// diff, or reaching a protected path, `.git`, outside the tree, through a symlink, or
/// shadowing a standard-library module with a new file.
pub fn static_check(pred: &Prediction, task: &Task, material: Option<&Material>) -> PatchCheck {
    let protection =
        crate::protect::Protection::for_task(task, material.into_iter().flat_map(|m| m.paths()));
    let human = human_part(pred, task, material);
    if let PatchBody::TooLarge { bytes, .. } = &pred.body {
        return PatchCheck::Rejected(format!(
            "patch is {bytes} bytes, above the limit of {}",
            patch::MAX_PATCH_BYTES
        ));
    }
    let text = pred.patch_text();
    let symlinks = material.map(|m| m.symlinks()).unwrap_or_default();
    let protected = |p: &str| protection.is_protected(p) && !human.names.contains(p);
    match patch::check_with(text, protected, &symlinks) {
        PatchCheck::Ok(paths) => {
            for p in &paths {
                let new = material.is_some_and(|m| !m.has_path_or_folder(p));
                if new && let Some(module) = protection.shadowed_stdlib(p) {
                    return PatchCheck::Rejected(format!(
                        "new file {p:?} would be imported instead of the standard library's `{module}` module"
                    ));
                }
            }
            PatchCheck::Ok(paths)
        }
        other => other,
    }
}

/// The sample's changes to protected files that are the human's own, every line alike.
pub fn human_part(pred: &Prediction, task: &Task, material: Option<&Material>) -> patch::HumanPart {
    let Some(m) = material.filter(|m| !m.human_patch.is_empty()) else {
        return patch::HumanPart::default();
    };
    let protection = crate::protect::Protection::for_task(task, m.paths());
    patch::human_part(pred.patch_text(), &m.human_patch, |p| {
        protection.is_protected(p)
    })
}

/// What goes into a sample's `patch.diff`: the patch, or for one too large to keep, what
/// it was.
pub(super) fn patch_file_text(pred: &Prediction) -> String {
    match &pred.body {
        PatchBody::TooLarge { bytes, sha256 } => format!(
            "# patch of {bytes} bytes (sha256 {sha256}) not kept: above the limit of {} bytes\n",
            patch::MAX_PATCH_BYTES
        ),
        _ => pred.patch_text().to_string(),
    }
}

/// The variants of a task: base, human, and one per sample, each sample's patch checked on
/// the host first (empty, rejected, not a diff: decided without a container).
pub(super) fn variants_of(
    task: &Task,
    material: &Material,
    samples: &[super::SampleInput],
) -> Vec<Variant> {
    let mut variants = vec![
        Variant::new("base", Role::Base, None),
        Variant::new("human", Role::Human, Some(material.human_patch.clone())),
    ];
    for (i, s) in samples.iter().enumerate() {
        let mut v = Variant::new(
            &format!("s{}", s.index),
            Role::Sample(i),
            Some(patch_file_text(&s.prediction)),
        );
        match static_check(&s.prediction, task, Some(material)) {
            PatchCheck::Empty => {
                v.apply_log = "empty patch: nothing to apply\n".into();
                v.fail(Status::EmptyPatch, "the patch is empty".into());
            }
            PatchCheck::Rejected(why) => {
                v.apply_log = format!("patch rejected before applying: {why}\n");
                v.fail(Status::PatchRejected, why);
            }
            PatchCheck::NotADiff(why) => {
                v.apply_log = format!("not a diff, nothing to apply: {why}\n");
                v.fail(Status::PatchFailed, format!("not a diff: {why}"));
            }
            PatchCheck::Ok(paths) => {
                v.apply_log = format!("paths touched: {}\n", paths.join(", "));
                v.human_part = human_part(&s.prediction, task, Some(material));
                if !v.human_part.paths.is_empty() {
                    v.apply_log.push_str(&format!(
                        "the human's own change, taken whole: {} (protected; applied as the \
                         human's, and held to the human's version)\n",
                        v.human_part
                            .paths
                            .iter()
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
            }
        }
        variants.push(v);
    }
    variants
}

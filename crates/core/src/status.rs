//! A sample's outcome, as every report and the verdict name it.

use serde::{Deserialize, Serialize};

/// A sample's outcome. Model outcomes first; `base_failed` and `error` are not the model's
/// fault, are counted apart and retried on resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Passed,
    TestFailed,
    Timeout,
    Oom,
    BuildFailed,
    PatchFailed,
    PatchRejected,
    EmptyPatch,
    BaseFailed,
    Error,
    /// Not attempted: the task needs GPUs this host cannot give and `--skip-gpu` was set.
    Skipped,
}

impl Status {
    pub const ALL: [Status; 11] = [
        Status::Passed,
        Status::TestFailed,
        Status::Timeout,
        Status::Oom,
        Status::BuildFailed,
        Status::PatchFailed,
        Status::PatchRejected,
        Status::EmptyPatch,
        Status::BaseFailed,
        Status::Error,
        Status::Skipped,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::TestFailed => "test_failed",
            Status::Timeout => "timeout",
            Status::Oom => "oom",
            Status::BuildFailed => "build_failed",
            Status::PatchFailed => "patch_failed",
            Status::PatchRejected => "patch_rejected",
            Status::EmptyPatch => "empty_patch",
            Status::BaseFailed => "base_failed",
            Status::Error => "error",
            Status::Skipped => "skipped",
        }
    }

    /// Best-of-K order: passed > test_failed > timeout > oom > build_failed > patch_failed >
    /// patch_rejected > empty_patch > base_failed > error > skipped. Lower is better.
    pub fn rank(self) -> usize {
        Status::ALL
            .iter()
            .position(|s| *s == self)
            .unwrap_or(usize::MAX)
    }

    /// Not the model's fault: run again when the command is repeated.
    pub fn retried_on_resume(self) -> bool {
        matches!(self, Status::BaseFailed | Status::Error | Status::Skipped)
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_of_k_order() {
        let mut v = vec![
            Status::Error,
            Status::EmptyPatch,
            Status::Passed,
            Status::BaseFailed,
            Status::TestFailed,
            Status::PatchFailed,
            Status::BuildFailed,
            Status::PatchRejected,
        ];
        v.sort_by_key(|s| s.rank());
        assert_eq!(
            v,
            [
                Status::Passed,
                Status::TestFailed,
                Status::BuildFailed,
                Status::PatchFailed,
                Status::PatchRejected,
                Status::EmptyPatch,
                Status::BaseFailed,
                Status::Error
            ]
        );
        assert!(Status::Error.retried_on_resume());
        assert!(!Status::TestFailed.retried_on_resume());
        assert_eq!(
            serde_json::to_string(&Status::PatchRejected).unwrap(),
            "\"patch_rejected\""
        );
    }
}

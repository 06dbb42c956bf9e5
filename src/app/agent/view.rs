//! What an agent's container shows it (docs/src/commands/agent.md: an agent never sees hidden tests,
//! reference results or the human fix). The agent runs in an image made from the task's
//! (see `image`), whose build takes the evaluation's hidden parts out
//! (container/programs/agent_hide.sh):
//!
//! - the task's `[image] files` (root-owned files outside the tree: GSO's test scripts) and
//!   the folder of base's reference results GSO tasks write at build
//!   (`import_gso::REFERENCE_DIR`), removed;
//! - every commit that base's does not reach (a prebuilt image's `.git` may hold the upstream
//!   history past base, the human's fix included, on a branch, a tag, a reflog or as loose
//!   objects): `/testbed/.git` is replaced by a clone of base's history alone (the commits
//!   up to `harness-base`, which stays a tag, and the branch HEAD named, if any), its index
//!   and `info/` (the image's ignored environment) kept; the build fails if one is left.
//!
//! Before the agent starts, the harness checks again, as the sandbox user, that none of
//! the hidden paths is there. The evaluation's containers are not touched: they keep
//! everything.

use std::time::Duration;

use anyhow::{Result, bail};

use crate::core::task::Task;
use crate::sandbox::docker::container::Sandbox;

/// The paths of the task's image an agent must not see: its `[image] files` and the folder
/// of reference results GSO tasks write.
pub fn hidden_paths(task: &Task) -> Vec<String> {
    let mut out: Vec<String> = task.image_files.iter().map(|(p, _)| p.clone()).collect();
    out.push(crate::app::import_gso::REFERENCE_DIR.to_string());
    out.sort();
    out.dedup();
    out
}

/// Whether `command` names one of `hidden` (the prompt leaves such commands out).
pub fn names_hidden(command: &str, hidden: &[String]) -> bool {
    hidden.iter().any(|h| command.contains(h.as_str()))
}

/// Checks, as the sandbox user, that none of the hidden paths is in the agent's container.
pub async fn check_hidden(sandbox: &Sandbox, task: &Task) -> Result<()> {
    let check: Vec<String> = hidden_paths(task)
        .iter()
        .map(|p| {
            format!(
                "if [ -e {q} ] || [ -L {q} ]; then echo {q}; fi",
                q = quoted(p)
            )
        })
        .collect();
    let argv = vec!["/bin/sh".into(), "-c".into(), check.join("; ")];
    let seen = sandbox
        .exec_as(
            &argv,
            crate::sandbox::protect::RUN_AS,
            &[],
            Duration::from_secs(60),
            64 * 1024,
        )
        .await?;
    if !seen.success() || !seen.output.trim().is_empty() {
        bail!(
            "the agent could still see hidden parts of {}: {}",
            task.id,
            seen.output.trim()
        );
    }
    Ok(())
}

/// A shell word: `s` in single quotes.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_commands_are_found_and_paths_quoted() {
        let hidden = vec!["/gso_test_0.py".to_string(), "/opt/gso-reference".into()];
        assert!(names_hidden("python /gso_test_0.py --x", &hidden));
        assert!(names_hidden(
            "x --file_prefix /opt/gso-reference/gso_0",
            &hidden
        ));
        assert!(!names_hidden("python3 bench.py", &hidden));
        assert_eq!(quoted("/a b/it's"), r"'/a b/it'\''s'");
    }
}

//! What an agent's container shows it (docs/src/commands/agent.md: an agent never sees hidden tests,
//! reference results or the human fix). The agent runs in the task's image, which holds the
//! evaluation's hidden parts; before the agent starts, root takes them out of its container
//! and checks, as the sandbox user, that they are gone:
//!
//! - the task's `[image] files` (root-owned files outside the tree: GSO's test scripts) and
//!   the folder of base's reference results GSO tasks write at build
//!   (`import_gso::REFERENCE_DIR`), removed;
//! - every commit that base's does not reach (a prebuilt image's `.git` may hold the upstream
//!   history past base, the human's fix included, on a branch, a tag, a reflog or as loose
//!   objects): `/testbed/.git` is replaced by a clone of base's history alone (the commits
//!   up to `harness-base`, which stays a tag, and the branch HEAD named, if any), its index
//!   and `info/` (the image's ignored environment) kept; root's copy of the whole repository,
//!   which the diff is made with, is in a folder only root can read.
//!
//! The evaluation's containers are not touched: they keep everything.

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

/// A shell word: `s` in single quotes.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Root's script: the hidden paths removed, `/testbed/.git` made a clone of base's history
/// from root's copy (`agent_git`), owned as the image's lock has it (folders root's and
/// sticky, files the sandbox user's, `config` root's and read-only). It prints the commits
/// of root's copy that base does not reach and the agent's repository still has (none).
fn hide_script(hidden: &[String], agent_git: &str) -> String {
    let paths: Vec<String> = hidden.iter().map(|p| quoted(p)).collect();
    format!(
        "set -e; export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null; \
         rm -rf -- {paths}; \
         V=/opt/agent-view; rm -rf $V; \
         git clone -q --no-local --no-checkout --single-branch --no-tags --branch harness-base {agent_git} $V; \
         G=\"git --git-dir=$V/.git\"; \
         $G remote remove origin; $G tag -f harness-base HEAD >/dev/null; \
         if B=$(git --git-dir={agent_git} symbolic-ref -q HEAD); then $G update-ref \"$B\" HEAD; $G symbolic-ref HEAD \"$B\"; fi; \
         if [ -f {agent_git}/index ]; then cp {agent_git}/index $V/.git/index; fi; \
         if [ -d {agent_git}/info ]; then mkdir -p $V/.git/info; cp -a {agent_git}/info/. $V/.git/info/; fi; \
         rm -rf /testbed/.git; mv $V/.git /testbed/.git; rm -rf $V; \
         chown -R {uid}:{gid} /testbed/.git; \
         find /testbed/.git -type d -exec chown 0:0 {{}} + -exec chmod 1777 {{}} +; \
         chown 0:0 /testbed/.git/config; chmod 444 /testbed/.git/config; \
         git --git-dir={agent_git} rev-list --all --not harness-base \
           | git --git-dir=/testbed/.git cat-file --batch-check | {{ grep -v ' missing$' || true; }}",
        paths = paths.join(" "),
        uid = crate::sandbox::protect::RUN_UID,
        gid = crate::sandbox::protect::RUN_GID,
    )
}

/// Takes the hidden parts out of the agent's container (before anything of the agent has
/// run, after root's copy of the repository is made) and checks, as the sandbox user, that
/// none of the hidden paths is there and, as root, that no later commit is in its `.git`.
pub async fn hide(sandbox: &Sandbox, task: &Task, agent_git: &str) -> Result<()> {
    let hidden = hidden_paths(task);
    let out = sandbox
        .sh_clean(
            &hide_script(&hidden, agent_git),
            Duration::from_secs(600),
            64 * 1024,
        )
        .await?;
    if !out.success() {
        bail!(
            "cannot take the hidden parts of {} out of the agent's container: {}",
            task.id,
            out.output.trim()
        );
    }
    if !out.output.trim().is_empty() {
        bail!(
            "the agent's repository of {} still holds commits later than base: {}",
            task.id,
            out.output.trim()
        );
    }
    let check: Vec<String> = hidden
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
        let script = hide_script(&hidden, "/opt/agent-base.git");
        assert!(script.contains("rm -rf -- '/gso_test_0.py' '/opt/gso-reference';"));
    }
}

//! The agent's image: the task's image with what the agent must not see taken out
//! (container/programs/agent_hide.sh), its script and task file in, and its `setup` commands
//! run, all at image build, as root under Docker's default build settings, never in the
//! agent's container (where root runs nothing but the harness's supervisor). The set-up
//! runs after the hiding: it sees no more than the agent does.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};

use super::{Agent, prompt, view};
use crate::core::task::Task;
use crate::sandbox::docker::derived::{Derived, ensure_derived};
use crate::sandbox::docker::{Engine, LABEL_INSTANCE, LABEL_MANAGED};

/// A shell word: `s` in single quotes.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The agent image's Dockerfile steps after `FROM`, `hidden` the paths taken out: two steps
/// (each step of the classic builder is a container of its own: seconds each), the set-up
/// in the same step as the hiding, after it.
fn steps(agent: &Agent, hidden: &[String]) -> String {
    let hidden: Vec<String> = hidden.iter().map(|p| quoted(p)).collect();
    let mut run = format!(
        "sh /opt/agent-build/agent_hide.sh {} && rm -rf /opt/agent-build",
        hidden.join(" ")
    );
    for cmd in &agent.setup {
        run.push_str(&format!(" && (cd /testbed && {cmd})"));
    }
    format!(
        "COPY root/ /\nRUN [\"/bin/sh\", \"-c\", {}]\n",
        serde_json::Value::String(run)
    )
}

/// The agent image for `task`, built from its task image unless the engine has it.
pub async fn ensure(
    engine: &Engine,
    agent: &Agent,
    task: &Task,
    task_image: &str,
    log_path: &Path,
) -> Result<String> {
    let hide = crate::sandbox::assets::ASSETS
        .iter()
        .find(|a| a.path == "opt/harness/agent_hide.sh")
        .context("the harness's agent_hide.sh is missing from its assets")?;
    let mut files = vec![
        (
            "root/opt/agent-build/agent_hide.sh".to_string(),
            hide.bytes.to_vec(),
            0o755,
        ),
        (
            "root/opt/agent/task.md".to_string(),
            prompt(task).into_bytes(),
            0o644,
        ),
    ];
    if let Some(script) = &agent.script {
        let bytes = std::fs::read(script).with_context(|| {
            format!(
                "agent {}: script {}: cannot read",
                agent.name,
                script.display()
            )
        })?;
        files.push(("root/opt/agent/run".to_string(), bytes, 0o755));
    }
    if let Some(install) = agent.pypi.clone() {
        let requirement = install.requirement.clone();
        let fetched = tokio::task::spawn_blocking(move || {
            let dir = super::pypi::fetch(&install, &|m| eprintln!("{m}"))?;
            super::pypi::image_files(&install, &dir)
        })
        .await
        .with_context(|| format!("agent {}: fetching {requirement}", agent.name))?
        .with_context(|| format!("agent {}", agent.name))?;
        files.extend(fetched);
    }
    let derived = Derived {
        repository: format!(
            "harness-agent/{}-{}",
            crate::store::run_folder::model_slug(&agent.name).to_lowercase(),
            task.id.to_lowercase()
        ),
        from: task_image.to_string(),
        steps: steps(agent, &view::hidden_paths(task)),
        labels: vec![
            (LABEL_MANAGED.to_string(), "true".to_string()),
            (LABEL_INSTANCE.to_string(), task.id.clone()),
            ("org.harness.agent".to_string(), agent.name.clone()),
        ],
        files,
        log_path,
        timeout: agent.time_limit.max(Duration::from_secs(600)),
    };
    ensure_derived(engine, &derived)
        .await
        .with_context(|| format!("agent {}: its image for {}", agent.name, task.id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setup_runs_after_the_hiding_in_one_step() {
        assert_eq!(quoted("/a b/it's"), r"'/a b/it'\''s'");
        let agent = Agent {
            name: "x".into(),
            command: "true".into(),
            script: None,
            setup: vec!["pip install 'a b'".into(), "echo \"q\"".into()],
            env: Vec::new(),
            network: false,
            time_limit: Duration::from_secs(60),
            cpus: None,
            memory_bytes: None,
            ..Agent::default()
        };
        let s = steps(&agent, &["/gso_test_0.py".to_string()]);
        let hide = s.find("agent_hide.sh").unwrap();
        let setup = s.find("pip install").unwrap();
        assert!(hide < setup, "{s}");
        assert!(s.contains("agent_hide.sh '/gso_test_0.py'"), "{s}");
        assert!(s.contains(r#"&& (cd /testbed && echo \"q\")"#), "{s}");
        assert_eq!(s.lines().count(), 2, "{s}");
    }
}

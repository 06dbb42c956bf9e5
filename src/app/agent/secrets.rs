//! An agent's secrets: read from the harness's environment at run time; redacted and
//! refused by `core::secrets`.
//!
//! An agents.toml's `env` only asks, as a task's `[env] pass` does: a variable reaches the
//! agent's container when the user names it with `--pass-env` (or `HARNESS_PASS_ENV`).
//! Unlike a task's (left unset, with a warning), an agent that asks for one the user did not
//! pass is an error before any container starts: the agent cannot run without it.

use anyhow::{Result, bail};

use super::Agent;
pub use crate::core::secrets::{redact, secret_forms, secret_in};

/// The secret values of `agent.env`, from the harness's environment; a clear error naming
/// every one the user did not pass (`--pass-env`) or that is not set.
pub fn secrets(agent: &Agent) -> Result<Vec<(String, String)>> {
    let (passed, refused) = crate::core::task::allowed_env(&agent.env);
    values(agent, &passed, &refused, |name| std::env::var(name).ok())
}

/// The values of `passed` (read by `lookup`), or an error naming what is `refused` (not
/// passed by the user) and what is missing.
fn values(
    agent: &Agent,
    passed: &[String],
    refused: &[String],
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>> {
    if !refused.is_empty() {
        bail!(
            "agent {} asks for {} from this environment, which only `--pass-env` passes to a \
             container: add `--pass-env {}` (or set HARNESS_PASS_ENV={})",
            agent.name,
            refused.join(", "),
            refused.join(" --pass-env "),
            refused.join(",")
        );
    }
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for name in passed {
        match lookup(name) {
            Some(v) if !v.is_empty() => found.push((name.clone(), v)),
            _ => missing.push(name.as_str()),
        }
    }
    if !missing.is_empty() {
        bail!(
            "agent {} needs {} in the environment (set when the harness runs; never stored)",
            agent.name,
            missing.join(", ")
        );
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn agent(env: &[&str]) -> Agent {
        Agent {
            name: "x".into(),
            command: "true".into(),
            script: None,
            setup: Vec::new(),
            env: env.iter().map(|s| s.to_string()).collect(),
            network: false,
            time_limit: Duration::from_secs(1),
            cpus: None,
            memory_bytes: None,
            ..Agent::default()
        }
    }

    #[test]
    fn missing_secrets_are_named() {
        let a = agent(&["HARNESS_TEST_SURELY_UNSET_VARIABLE"]);
        let e = values(&a, &a.env, &[], |_| None).unwrap_err().to_string();
        assert!(
            e.contains("needs HARNESS_TEST_SURELY_UNSET_VARIABLE"),
            "{e}"
        );
    }

    /// A variable the user did not pass is an error naming the flag to add, even when the
    /// environment has it: the agents file only asks.
    #[test]
    fn only_variables_the_user_passes_reach_an_agent() {
        let a = agent(&["KEY_A", "KEY_B"]);
        let set = |_: &str| Some("value".to_string());
        let e = values(&a, &["KEY_A".into()], &["KEY_B".into()], set)
            .unwrap_err()
            .to_string();
        assert!(e.contains("agent x asks for KEY_B"), "{e}");
        assert!(e.contains("add `--pass-env KEY_B`"), "{e}");
        let got = values(&a, &a.env, &[], set).unwrap();
        assert_eq!(
            got,
            [
                ("KEY_A".to_string(), "value".to_string()),
                ("KEY_B".to_string(), "value".to_string())
            ]
        );
        // The process-wide rule: nothing is passed unless named (no --pass-env in tests).
        let (passed, refused) = crate::core::task::allowed_env(&a.env);
        assert!(
            passed.is_empty() && refused == a.env,
            "{passed:?} {refused:?}"
        );
    }
}

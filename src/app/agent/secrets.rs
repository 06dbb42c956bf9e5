//! An agent's secrets: read from the harness's environment at run time; redacted and
//! refused by `core::secrets`.

use anyhow::{Result, bail};

use super::Agent;
pub use crate::core::secrets::{redact, secret_forms, secret_in};

/// The secret values of `agent.env`, from the harness's environment; a clear error naming
/// every one that is missing.
pub fn secrets(agent: &Agent) -> Result<Vec<(String, String)>> {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for name in &agent.env {
        match std::env::var(name) {
            Ok(v) if !v.is_empty() => found.push((name.clone(), v)),
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

    #[test]
    fn missing_secrets_are_named() {
        let agent = Agent {
            name: "x".into(),
            command: "true".into(),
            script: None,
            setup: Vec::new(),
            env: vec!["HARNESS_TEST_SURELY_UNSET_VARIABLE".into()],
            network: false,
            time_limit: Duration::from_secs(1),
            cpus: None,
            memory_bytes: None,
        };
        let e = secrets(&agent).unwrap_err().to_string();
        assert!(e.contains("HARNESS_TEST_SURELY_UNSET_VARIABLE"), "{e}");
    }
}

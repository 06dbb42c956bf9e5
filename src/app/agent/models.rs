//! `harness agent models --model-server URL`: the models an OpenAI-compatible server offers
//! (its `GET /v1/models`: a local Ollama, vLLM, a company proxy), for a batch's agent x model
//! entries. The key, when the server needs one, is read from the variable `--key` names.

use anyhow::{Context, Result, bail};

/// The ids of the models `server` lists.
pub async fn list(server: &str, key_var: Option<&str>) -> Result<Vec<String>> {
    let base = server.trim_end_matches('/');
    let url = if base.ends_with("/v1") {
        format!("{base}/models")
    } else {
        format!("{base}/v1/models")
    };
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(std::time::Duration::from_secs(30))
        .build()?;
    let mut req = client.get(&url);
    if let Some(var) = key_var {
        let key =
            std::env::var(var).with_context(|| format!("--key {var}: the variable is not set"))?;
        req = req.bearer_auth(key);
    }
    let resp = req
        .send()
        .await
        .with_context(|| format!("{url}: no answer"))?;
    let status = resp.status();
    let body = resp.text().await.unwrap_or_default();
    if !status.is_success() {
        bail!(
            "{url}: {status}: {}",
            crate::core::text::for_terminal(&body.chars().take(300).collect::<String>())
        );
    }
    let json: serde_json::Value =
        serde_json::from_str(&body).with_context(|| format!("{url}: not a JSON answer"))?;
    let ids: Vec<String> = json["data"]
        .as_array()
        .with_context(|| format!("{url}: no `data` list of models in its answer"))?
        .iter()
        .filter_map(|m| m["id"].as_str().map(str::to_string))
        .collect();
    Ok(ids)
}

//! What of a request the gateway forwards. The agent's container has no network; the
//! gateway must not become one, nor let the agent choose what it is billed or judged as:
//!
//! - only a JSON object (or nothing, for `GET /v1/models`) is forwarded;
//! - client tools only: a provider's own tools (web search and fetch, code execution, MCP
//!   servers, file search, containers) would reach the network for the agent and bill
//!   outside the counted tokens; they are taken out;
//! - nothing the provider would fetch or look up for it: a content block whose source is a
//!   URL (`"source": {"type": "url"}`, an `http(s)` `image_url` or `file_url`) or a stored
//!   file (`file_id`) refuses the request (inline data, `data:` URLs, are forwarded);
//! - nothing priced apart from the table: a service tier, web search options and a
//!   one-hour cache lifetime are taken out, streamed Chat Completions always ask for their
//!   usage, background responses (billed later, no usage in the answer) are refused;
//! - the model is the run's: with one set (agents.toml's `model`, a batch entry's), every
//!   request asks for it, whatever the agent wrote.

use serde_json::{Map, Value};

/// The body to forward, or why the request is refused.
pub fn vetted(
    provider: super::Provider,
    body: &[u8],
    model: Option<&str>,
) -> Result<Vec<u8>, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(body.to_vec());
    }
    let mut v: Value = serde_json::from_slice(body).map_err(|_| "not a JSON request")?;
    let obj = v.as_object_mut().ok_or("not a JSON object")?;
    if obj.get("background").and_then(Value::as_bool) == Some(true) {
        return Err(
            "background responses are not forwarded (their usage is not in the answer)".into(),
        );
    }
    for key in [
        "mcp_servers",
        "container",
        "conversation",
        "prompt",
        "service_tier",
        "web_search_options",
    ] {
        obj.remove(key);
    }
    if let Some(Value::Array(tools)) = obj.get_mut("tools") {
        tools.retain(|t| client_tool(provider, t));
    }
    if let Some(m) = model {
        obj.insert("model".into(), Value::String(m.to_string()));
    }
    if provider == super::Provider::OpenAi
        && obj.get("stream").and_then(Value::as_bool) == Some(true)
    {
        // Responses report usage in their last event; Chat Completions only when asked.
        if obj.contains_key("messages") {
            let options = obj
                .entry("stream_options")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(o) = options.as_object_mut() {
                o.insert("include_usage".into(), Value::Bool(true));
            }
        }
    }
    scrub(&mut v)?;
    serde_json::to_vec(&v).map_err(|e| e.to_string())
}

/// Refuses what the provider would fetch or look up; drops a one-hour cache lifetime.
fn scrub(v: &mut Value) -> Result<(), String> {
    match v {
        Value::Array(items) => items.iter_mut().try_for_each(scrub),
        Value::Object(obj) => {
            if obj.get("type").and_then(Value::as_str) == Some("url") && obj.contains_key("url") {
                return Err("content the provider would fetch from a URL is not forwarded (the agent has no network; send the data inline)".into());
            }
            // (A plain "url" elsewhere, e.g. in an agent's own tool call, is the agent's.)
            for key in ["image_url", "file_url"] {
                if let Some(u) = obj.get(key).and_then(url_of)
                    && !u.trim_start().to_ascii_lowercase().starts_with("data:")
                {
                    return Err(format!(
                        "{key} {:?}: only inline data is forwarded (the provider would fetch it for an agent that has no network)",
                        u.chars().take(60).collect::<String>()
                    ));
                }
            }
            // A content block naming a stored file (a tool's schema may have a property
            // of that name: it is an object there, not a string).
            if obj.get("file_id").is_some_and(Value::is_string) && obj.contains_key("type") {
                return Err(
                    "stored files (file_id) are not forwarded: send the data inline".into(),
                );
            }
            if let Some(Value::Object(cache)) = obj.get_mut("cache_control") {
                cache.remove("ttl");
            }
            obj.values_mut().try_for_each(scrub)
        }
        _ => Ok(()),
    }
}

/// A URL given as a string or as `{"url": ...}`.
fn url_of(v: &Value) -> Option<&str> {
    v.as_str().or_else(|| v.get("url")?.as_str())
}

/// The `anthropic-beta` header without what is priced apart (the 1M-token context window,
/// billed at a premium the price table does not hold); `None` when nothing is left.
pub fn beta_header(value: &str) -> Option<String> {
    let kept: Vec<&str> = value
        .split(',')
        .map(str::trim)
        .filter(|b| !b.is_empty() && !b.starts_with("context-1m"))
        .collect();
    (!kept.is_empty()).then(|| kept.join(","))
}

/// A tool the agent's own process runs (its calls come back to the agent), not the
/// provider.
fn client_tool(provider: super::Provider, tool: &Value) -> bool {
    let kind = tool.get("type").and_then(Value::as_str);
    match provider {
        super::Provider::Anthropic => match kind {
            None | Some("custom") => true,
            Some(k) => ["bash_", "text_editor_", "computer_", "memory_"]
                .iter()
                .any(|p| k.starts_with(p)),
        },
        super::Provider::OpenAi => {
            matches!(
                kind,
                Some("function" | "custom" | "local_shell" | "namespace") | None
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Provider;
    use super::*;

    fn forwarded(provider: Provider, body: &str, model: Option<&str>) -> Value {
        serde_json::from_slice(&vetted(provider, body.as_bytes(), model).unwrap()).unwrap()
    }

    #[test]
    fn provider_side_tools_are_taken_out_and_background_refused() {
        let body = r#"{"model":"m","tools":[{"name":"Bash","input_schema":{}},{"type":"web_search_20250305","name":"web_search"},{"type":"web_fetch_20250910","name":"web_fetch"},{"type":"bash_20250124","name":"bash"}],"mcp_servers":[{"url":"http://evil"}]}"#;
        let out = forwarded(Provider::Anthropic, body, None);
        let names: Vec<&str> = out["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Bash", "bash"]);
        assert!(out.get("mcp_servers").is_none());
        let codex = r#"{"tools":[{"type":"function","name":"exec_command"},{"type":"web_search"},{"type":"mcp","server_url":"x"},{"type":"namespace","name":"n"}]}"#;
        let out = forwarded(Provider::OpenAi, codex, None);
        assert_eq!(out["tools"].as_array().unwrap().len(), 2);
        assert!(vetted(Provider::OpenAi, br#"{"background":true}"#, None).is_err());
        assert!(vetted(Provider::OpenAi, b"not json", None).is_err());
        assert_eq!(vetted(Provider::OpenAi, b"", None).unwrap(), b"");
    }

    #[test]
    fn nothing_is_fetched_for_the_agent_and_the_run_decides_model_and_price() {
        for refused in [
            r#"{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://x/?leak=1"}}]}]}"#,
            r#"{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"http://x"}}]}]}"#,
            r#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x"}}]}]}"#,
            r#"{"input":[{"role":"user","content":[{"type":"input_image","image_url":"https://x"}]}]}"#,
            r#"{"input":[{"role":"user","content":[{"type":"input_file","file_url":"https://x/a.pdf"}]}]}"#,
            r#"{"input":[{"role":"user","content":[{"type":"input_file","file_id":"file-1"}]}]}"#,
            r#"{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"file","file_id":"f"}}]}]}"#,
        ] {
            assert!(
                vetted(Provider::OpenAi, refused.as_bytes(), None).is_err(),
                "{refused}"
            );
        }
        let inline = r#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}"#;
        assert!(vetted(Provider::OpenAi, inline.as_bytes(), None).is_ok());
        // Tools whose inputs are named url, image_url or file_id, and an agent's own call
        // with a URL, are the agent's.
        let schema = r#"{"tools":[{"name":"Fetch","input_schema":{"type":"object","properties":{"url":{"type":"string"},"image_url":{"type":"string"},"file_id":{"type":"string"}}}}],"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Fetch","input":{"url":"https://example.com"}}]}]}"#;
        assert!(vetted(Provider::Anthropic, schema.as_bytes(), None).is_ok());
        let body = r#"{"model":"gpt-5-pro","stream":true,"service_tier":"priority","web_search_options":{},"messages":[{"role":"user","content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]}"#;
        let out = forwarded(Provider::OpenAi, body, Some("gpt-5-mini"));
        assert_eq!(
            out["model"], "gpt-5-mini",
            "the run's model, not the agent's"
        );
        assert!(out.get("service_tier").is_none() && out.get("web_search_options").is_none());
        assert_eq!(out["stream_options"]["include_usage"], true);
        assert!(
            out["messages"][0]["content"][0]["cache_control"]
                .get("ttl")
                .is_none()
        );
        assert_eq!(
            beta_header(
                "claude-code-20250219, context-1m-2025-08-07,interleaved-thinking-2025-05-14"
            ),
            Some("claude-code-20250219,interleaved-thinking-2025-05-14".into())
        );
        assert_eq!(beta_header("context-1m-2025-08-07"), None);
    }
}

//! What of a request body the gateway forwards: client tools only. A provider's own tools
//! (web search and fetch, code execution, MCP servers, file search, containers) would have
//! the provider reach the network for an agent that has none, and bill it outside the
//! counted tokens; they are taken out of the request, and background responses (billed
//! later, with no usage in the answer) are refused.

use serde_json::Value;

/// The body to forward, or why the request is refused.
pub fn vetted(provider: super::Provider, body: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let Ok(mut v) = serde_json::from_slice::<Value>(body) else {
        return Ok(None);
    };
    let Some(obj) = v.as_object_mut() else {
        return Ok(None);
    };
    if obj.get("background").and_then(Value::as_bool) == Some(true) {
        return Err(
            "background responses are not forwarded (their usage is not in the answer)".into(),
        );
    }
    let mut changed = false;
    for key in ["mcp_servers", "container", "conversation", "prompt"] {
        changed |= obj.remove(key).is_some();
    }
    if let Some(Value::Array(tools)) = obj.get_mut("tools") {
        let before = tools.len();
        tools.retain(|t| client_tool(provider, t));
        changed |= tools.len() != before;
    }
    if !changed {
        return Ok(None);
    }
    serde_json::to_vec(&v).map(Some).map_err(|e| e.to_string())
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

    #[test]
    fn provider_side_tools_are_taken_out_and_background_refused() {
        let body = br#"{"model":"m","tools":[{"name":"Bash","input_schema":{}},{"type":"web_search_20250305","name":"web_search"},{"type":"web_fetch_20250910","name":"web_fetch"},{"type":"bash_20250124","name":"bash"}],"mcp_servers":[{"url":"http://evil"}]}"#;
        let out: Value =
            serde_json::from_slice(&vetted(Provider::Anthropic, body).unwrap().unwrap()).unwrap();
        let names: Vec<&str> = out["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Bash", "bash"]);
        assert!(out.get("mcp_servers").is_none());
        let codex = br#"{"tools":[{"type":"function","name":"exec_command"},{"type":"web_search"},{"type":"mcp","server_url":"x"},{"type":"namespace","name":"n"}]}"#;
        let out: Value =
            serde_json::from_slice(&vetted(Provider::OpenAi, codex).unwrap().unwrap()).unwrap();
        assert_eq!(out["tools"].as_array().unwrap().len(), 2);
        assert!(vetted(Provider::OpenAi, br#"{"background":true}"#).is_err());
        assert_eq!(vetted(Provider::OpenAi, br#"{"tools":[]}"#).unwrap(), None);
    }
}

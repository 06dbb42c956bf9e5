//! The gateway against the scripted model server (scripts/scripted_model.py), over its real
//! unix socket: what it refuses, what it forwards (with the key, never the token), what it
//! counts, and the budget.

use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

struct Server(std::process::Child, u16, std::path::PathBuf);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn scripted(dir: &Path) -> Server {
    scripted_with(dir, r#""errors": [429]"#)
}

/// The scripted server with `errors` (and what else the script says) as given.
fn scripted_with(dir: &Path, errors: &str) -> Server {
    let script = dir.join("script.json");
    std::fs::write(
        &script,
        format!(
            r#"{{"steps": ["echo hi"], {errors},
            "usage": {{"input_tokens": 1000, "output_tokens": 100}}}}"#
        ),
    )
    .unwrap();
    let port = dir.join("port");
    let log = dir.join("log.jsonl");
    let child = std::process::Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/scripted_model.py"))
        .arg("--script")
        .arg(&script)
        .arg("--port-file")
        .arg(&port)
        .arg("--log")
        .arg(&log)
        .spawn()
        .unwrap();
    let mut server = Server(child, 0, log);
    for _ in 0..100 {
        if let Ok(p) = std::fs::read_to_string(&port) {
            server.1 = p.trim().parse().unwrap();
            return server;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the scripted server did not start");
}

/// One request over the socket: (status, body).
async fn ask(socket: &Path, method: &str, path: &str, token: &str, body: &str) -> (u16, String) {
    let mut s = tokio::net::UnixStream::connect(socket).await.unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nhost: gateway\r\nx-api-key: {token}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text[9..12].parse().unwrap();
    (status, text)
}

async fn settled(gw: &Gateway, requests: u64) -> Usage {
    for _ in 0..50 {
        let u = gw.usage();
        if u.requests >= requests {
            return u;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    gw.usage()
}

/// A gateway to the scripted server, "claude-x" at $3 / $15 a million tokens.
async fn gateway(server: &Server, key: Option<String>, max_cost: f64) -> (Gateway, String) {
    gateway_for(server, key, Some(max_cost), None).await
}

async fn gateway_for(
    server: &Server,
    key: Option<String>,
    max_cost: Option<f64>,
    model: Option<&str>,
) -> (Gateway, String) {
    let mut prices = Prices::new();
    prices.insert(
        "claude-x".into(),
        Price {
            input: 3.0,
            output: 15.0,
            cache_read: None,
            cache_write: None,
        },
    );
    let upstream = Upstream {
        provider: Provider::Anthropic,
        base_url: format!("http://127.0.0.1:{}", server.1),
        key,
    };
    let token = new_token().unwrap();
    let grant = Grant {
        token: token.clone(),
        max_cost,
        model: model.map(str::to_string),
    };
    (
        Gateway::start(upstream, grant, prices).await.unwrap(),
        token,
    )
}

#[tokio::test]
async fn the_gateway_forwards_with_the_key_counts_refuses_and_keeps_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let server = scripted(dir.path());
    let (gw, token) = gateway(&server, Some("sk-real-key-for-the-provider".into()), 0.01).await;
    let socket = gw.socket();
    let body =
        r#"{"model": "claude-x", "stream": true, "messages": [], "tools": [{"name": "Bash"}]}"#;

    let (status, _) = ask(&socket, "POST", "/v1/messages", "sk-guess", body).await;
    assert_eq!(status, 401, "another token");
    let (status, _) = ask(&socket, "POST", "/v1/complete", &token, body).await;
    assert_eq!(status, 404, "not a model endpoint");
    assert_eq!(gw.usage().requests, 0, "refusals are not forwarded");

    // The provider's 429: passed back, counted as an API failure.
    let (status, text) = ask(&socket, "POST", "/v1/messages?beta=true", &token, body).await;
    assert_eq!(status, 429, "{text}");
    let u = settled(&gw, 1).await;
    assert_eq!((u.api_errors, u.ended_on_api_error), (1, true), "{u:?}");
    assert!(u.last_api_error.as_deref().unwrap_or("").contains("429"));

    // Answers stream back and are counted: 1000 in, 100 out, $0.0045 each.
    let (status, text) = ask(&socket, "POST", "/v1/messages", &token, body).await;
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains("message_stop") && text.contains("echo hi"),
        "{text}"
    );
    let u = settled(&gw, 2).await;
    assert!(!u.ended_on_api_error);
    assert_eq!((u.input_tokens, u.output_tokens), (1000, 100), "{u:?}");
    assert!((u.cost_usd.unwrap() - 0.0045).abs() < 1e-12, "{u:?}");
    for n in 3..=4 {
        let (status, _) = ask(&socket, "POST", "/v1/messages", &token, body).await;
        assert_eq!(status, 200);
        settled(&gw, n).await;
    }
    // $0.0135 spent of $0.01: refused, said, not forwarded.
    let (status, text) = ask(&socket, "POST", "/v1/messages", &token, body).await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("budget of $0.01 is spent"), "{text}");
    let u = gw.stop();
    assert_eq!((u.requests, u.refused_over_budget), (4, 1), "{u:?}");

    // The provider saw the key on every request, never the token.
    let log = std::fs::read_to_string(&server.2).unwrap();
    assert_eq!(log.lines().count(), 4, "{log}");
    for line in log.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(r["x-api-key"], "sk-real-key-for-the-provider", "{r}");
    }
    assert!(!log.contains(&token));
}

#[tokio::test]
async fn concurrent_requests_cannot_spend_past_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let server = scripted(dir.path());
    let (gw, token) = gateway(&server, None, 0.001).await;
    let socket = gw.socket();
    let body = r#"{"model": "claude-x", "messages": [], "tools": [{"name": "Bash"}, {"type": "web_search_20250305", "name": "web_search"}]}"#;
    // The scripted 429 first, then 20 at once: $0.0045 each against a budget of $0.001.
    ask(&socket, "POST", "/v1/messages", &token, body).await;
    let asks: Vec<_> = (0..20)
        .map(|_| {
            let (socket, token) = (socket.clone(), token.clone());
            tokio::spawn(async move { ask(&socket, "POST", "/v1/messages", &token, body).await })
        })
        .collect();
    let mut answered = 0;
    for a in asks {
        if a.await.unwrap().0 == 200 {
            answered += 1;
        }
    }
    assert_eq!(answered, 1, "one answer crosses the budget, no more");
    let u = gw.stop();
    assert_eq!(u.refused_over_budget, 19, "{u:?}");
    // The provider's own tools never reached it.
    let log = std::fs::read_to_string(&server.2).unwrap();
    assert!(!log.contains("web_search"), "{log}");
}

#[tokio::test]
async fn the_runs_model_is_asked_for_and_a_quoted_key_reaches_no_one() {
    let dir = tempfile::tempdir().unwrap();
    let server = scripted_with(dir.path(), r#""errors": [500], "quote_key": true"#);
    let key = "sk-real-key-quoted-by-a-careless-provider";
    let (gw, token) = gateway_for(&server, Some(key.into()), None, Some("claude-x")).await;
    let socket = gw.socket();
    let body = r#"{"model": "claude-opus-4-1", "messages": [], "tools": [{"name": "Bash"}]}"#;
    let (status, text) = ask(&socket, "POST", "/v1/messages", &token, body).await;
    assert_eq!(status, 500, "{text}");
    assert!(
        text.contains("for key ***") && !text.contains(key),
        "{text}"
    );
    let u = settled(&gw, 1).await;
    let said = u.last_api_error.clone().unwrap_or_default();
    assert!(said.contains("***") && !said.contains(key), "{said}");
    let (status, _) = ask(&socket, "POST", "/v1/messages", &token, body).await;
    assert_eq!(status, 200);
    let u = gw.stop();
    assert_eq!(
        u.models,
        vec!["claude-x".to_string()],
        "priced as the run's model"
    );
    let log = std::fs::read_to_string(&server.2).unwrap();
    assert!(
        log.lines().all(|l| l.contains(r#""model": "claude-x""#)),
        "the agent's own choice never reaches the provider: {log}"
    );
}

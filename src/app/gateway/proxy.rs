//! The gateway's HTTP side: hyper on the run's unix socket, each request checked (token,
//! path, budget), forwarded with the provider's key, its answer streamed back and counted.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::UnixListener;

use super::Shared;
use super::usage::UsageReader;

type Body = BoxBody<Bytes, std::io::Error>;

/// A request body over this is refused (a model request with a whole repository in it is
/// far smaller).
const MAX_REQUEST: usize = 16 << 20;
/// Connections a gateway serves at once (a request body is held whole: this bounds what a
/// run's agent can make the host hold).
const MAX_CONNECTIONS: usize = 16;

pub(super) async fn serve(listener: UnixListener, shared: Arc<Shared>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(move |req| handle(req, shared.clone()));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn handle(req: Request<Incoming>, shared: Arc<Shared>) -> Result<Response<Body>, Infallible> {
    Ok(match forward(req, shared).await {
        Ok(r) => r,
        Err((status, message)) => refusal(status, &message),
    })
}

/// An error in the shape both providers' clients read (`error.message`).
fn refusal(status: StatusCode, message: &str) -> Response<Body> {
    let body = serde_json::json!({"type": "error",
        "error": {"type": "harness_gateway", "message": message}})
    .to_string();
    let mut r = Response::new(full(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn full(bytes: Bytes) -> Body {
    Full::new(bytes).map_err(|e: Infallible| match e {}).boxed()
}

/// The token the request carries, in either provider's header.
fn token_of(headers: &HeaderMap) -> Option<&str> {
    if let Some(v) = headers.get("x-api-key") {
        return v.to_str().ok();
    }
    headers
        .get(hyper::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

/// Headers that belong to one connection or carry a credential: never forwarded.
fn carried(name: &HeaderName) -> bool {
    !matches!(
        name.as_str(),
        "host"
            | "content-length"
            | "connection"
            | "keep-alive"
            | "proxy-authorization"
            | "proxy-connection"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "x-api-key"
            | "authorization"
            | "accept-encoding"
            | "content-encoding"
    )
}

async fn forward(
    req: Request<Incoming>,
    shared: Arc<Shared>,
) -> Result<Response<Body>, (StatusCode, String)> {
    let provider = shared.upstream.provider;
    if token_of(req.headers()) != Some(shared.grant.token.as_str()) {
        return Err((StatusCode::UNAUTHORIZED, "not this run's token".to_string()));
    }
    if !provider.allows(req.method(), req.uri().path()) {
        return Err((
            StatusCode::NOT_FOUND,
            format!(
                "{} {} is not a model endpoint this gateway forwards",
                req.method(),
                req.uri().path()
            ),
        ));
    }
    // With a budget, one request at a time: each is counted before the next is let through,
    // so concurrent requests cannot spend past it (at most the one that crosses it).
    let turn = match &shared.one_at_a_time {
        Some(s) => Some(s.clone().acquire_owned().await.map_err(|_| {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "the gateway is stopping".to_string(),
            )
        })?),
        None => None,
    };
    over_budget(&shared)?;
    let method = req.method().clone();
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    let mut headers = forwarded_headers(req.headers());
    let body = http_body_util::Limited::new(req.into_body(), MAX_REQUEST)
        .collect()
        .await
        .map_err(|e| (StatusCode::PAYLOAD_TOO_LARGE, format!("the request: {e}")))?
        .to_bytes();
    let body = match super::request::vetted(provider, &body, shared.grant.model.as_deref()) {
        Ok(vetted) => Bytes::from(vetted),
        Err(why) => {
            return Err((
                StatusCode::BAD_REQUEST,
                format!("the harness's gateway refuses this request: {why}"),
            ));
        }
    };
    let asked_model = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["model"].as_str().map(str::to_string))
        .unwrap_or_default();
    add_key(&mut headers, &shared.upstream)?;
    let url = format!("{}{path}", shared.upstream.base_url);
    let sent = shared
        .client
        .request(method, &url)
        .headers(headers)
        .body(body)
        .send()
        .await;
    let answer = match sent {
        Ok(a) => a,
        Err(e) => {
            let why = format!(
                "cannot reach {}: {}",
                super::shown_url(&shared.upstream.base_url),
                super::shown_url(&e.to_string())
            );
            api_failure(&shared, &why);
            return Err((StatusCode::BAD_GATEWAY, why));
        }
    };
    let status = answer.status();
    let mut response_headers = HeaderMap::new();
    for (k, v) in answer.headers() {
        if carried(k) {
            response_headers.append(k.clone(), v.clone());
        }
    }
    if !status.is_success() {
        // A failure's body is small and can quote the request's credentials: read whole
        // (bounded), the key taken out, before the agent or a record sees it.
        let text = without_key(&read_bounded(answer).await, &shared.upstream);
        if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            api_failure(
                &shared,
                &format!("{status} {}", text.chars().take(300).collect::<String>()),
            );
        } else if let Ok(mut u) = shared.usage.lock() {
            u.requests += 1;
            u.ended_on_api_error = false;
        }
        response_headers.remove(hyper::header::CONTENT_LENGTH);
        let mut r = Response::new(full(Bytes::from(text)));
        *r.status_mut() = status;
        *r.headers_mut() = response_headers;
        return Ok(r);
    }
    let streamed = response_headers
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let body = relay_body(
        answer,
        streamed,
        status.is_success(),
        asked_model,
        shared.clone(),
        turn,
    );
    let mut r = Response::new(body);
    *r.status_mut() = status;
    *r.headers_mut() = response_headers;
    Ok(r)
}

/// The request's headers as forwarded: no connection's or credential's, and the
/// `anthropic-beta` list without what is priced apart.
fn forwarded_headers(from: &HeaderMap) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (k, v) in from {
        if !carried(k) {
            continue;
        }
        if k.as_str() == "anthropic-beta" {
            if let Some(kept) = v.to_str().ok().and_then(super::request::beta_header)
                && let Ok(kept) = HeaderValue::from_str(&kept)
            {
                headers.append(k.clone(), kept);
            }
            continue;
        }
        headers.append(k.clone(), v.clone());
    }
    headers
}

/// The provider's key, in its header (none for a server that needs none).
fn add_key(
    headers: &mut HeaderMap,
    upstream: &super::Upstream,
) -> Result<(), (StatusCode, String)> {
    let Some(key) = &upstream.key else {
        return Ok(());
    };
    let (name, value) = match upstream.provider {
        super::Provider::Anthropic => ("x-api-key", key.clone()),
        super::Provider::OpenAi => ("authorization", format!("Bearer {key}")),
    };
    let value = HeaderValue::from_str(&value).map_err(|_| {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "the provider's key is not a header value".to_string(),
        )
    })?;
    headers.insert(HeaderName::from_static(name), value);
    Ok(())
}

/// At most 1 MiB of a failure's body, as text.
async fn read_bounded(answer: reqwest::Response) -> String {
    let mut out = Vec::new();
    let mut chunks = answer.bytes_stream();
    while let Some(Ok(bytes)) = chunks.next().await {
        out.extend_from_slice(&bytes);
        if out.len() > 1 << 20 {
            out.truncate(1 << 20);
            break;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `text` with the provider's key replaced by `***`.
fn without_key(text: &str, upstream: &super::Upstream) -> String {
    match upstream.key.as_deref() {
        Some(key) if !key.is_empty() => text.replace(key, "***"),
        _ => text.to_string(),
    }
}

/// Refuses a request once the sample's budget is spent.
fn over_budget(shared: &Shared) -> Result<(), (StatusCode, String)> {
    let Some(max) = shared.grant.max_cost else {
        return Ok(());
    };
    let Ok(mut usage) = shared.usage.lock() else {
        return Ok(());
    };
    let spent = if !usage.unpriced_models.is_empty() {
        format!(
            "a budget of ${max:.2} cannot be held: {} is not in the price table",
            usage.unpriced_models.join(", ")
        )
    } else if usage.unreported > 0 || usage.in_flight > 0 {
        format!(
            "a budget of ${max:.2} cannot be held: an answer reported no usage, so what was \
             spent is unknown"
        )
    } else {
        match usage.cost_usd {
            Some(c) if c >= max => format!("its budget of ${max:.2} is spent (${c:.4})"),
            _ => return Ok(()),
        }
    };
    usage.refused_over_budget += 1;
    Err((
        StatusCode::BAD_REQUEST,
        format!("the harness's gateway refuses this request: {spent}"),
    ))
}

fn api_failure(shared: &Shared, why: &str) {
    if let Ok(mut u) = shared.usage.lock() {
        u.requests += 1;
        u.api_errors += 1;
        u.ended_on_api_error = true;
        u.last_api_error = Some(why.to_string());
    }
}

/// The answer's body streamed back as it comes, read for its usage on the way; counted
/// when it ends (or the agent hangs up).
fn relay_body(
    answer: reqwest::Response,
    streamed: bool,
    counted: bool,
    asked_model: String,
    shared: Arc<Shared>,
    turn: Option<tokio::sync::OwnedSemaphorePermit>,
) -> Body {
    let (mut tx, rx) = futures::channel::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(16);
    if let Ok(mut u) = shared.usage.lock() {
        u.in_flight += 1;
    }
    tokio::spawn(async move {
        let _turn = turn;
        let mut reader = UsageReader::new(streamed);
        let mut chunks = answer.bytes_stream();
        let mut listening = true;
        while let Some(chunk) = chunks.next().await {
            match chunk {
                Ok(bytes) => {
                    reader.feed(&bytes);
                    if listening && tx.send(Ok(Frame::data(bytes))).await.is_err() {
                        listening = false;
                    }
                }
                Err(e) => {
                    let _ = tx.send(Err(std::io::Error::other(e.to_string()))).await;
                    break;
                }
            }
        }
        let (model, tokens) = reader.finish();
        let model = if model.is_empty() { asked_model } else { model };
        if let Ok(mut u) = shared.usage.lock() {
            u.in_flight -= 1;
            u.requests += 1;
            u.ended_on_api_error = false;
            match tokens {
                Some(t) if counted => u.add(&model, &t, &shared.prices),
                // An answer that reports no usage has an unknown cost, never zero.
                None if counted => u.unreported += 1,
                _ => {}
            }
        }
    });
    BodyExt::boxed(StreamBody::new(rx))
}

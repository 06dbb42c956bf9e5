//! The model gateway (docs/src/commands/agent.md): the harness's own HTTP server on the
//! host, one per agent run, on a unix socket in a folder of its own that is bind-mounted
//! into the agent's container (which has no network). The agent holds a token of this run
//! and the gateway's address; the gateway holds the provider's key, forwards what the token
//! allows (the provider's model endpoints, within the sample's budget) with the key added,
//! streams the answer back, and counts the tokens and dollars of every answer. The key is
//! never in the container: not in its environment, files or processes.

mod proxy;
mod request;
pub mod usage;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, bail};

pub use usage::{Price, Prices, Usage};

/// The API a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// Anthropic's Messages API (`/v1/messages`); the key goes in `x-api-key`.
    Anthropic,
    /// OpenAI's Responses and Chat Completions APIs (`/v1/responses`,
    /// `/v1/chat/completions`), and any server that speaks them (a local Ollama); the key
    /// goes in `Authorization: Bearer`.
    OpenAi,
}

impl Provider {
    pub fn parse(name: &str) -> Option<Provider> {
        match name {
            "anthropic" => Some(Provider::Anthropic),
            "openai" => Some(Provider::OpenAi),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::OpenAi => "openai",
        }
    }

    /// The provider's own address, used unless the user names another (`--model-server`).
    pub fn default_base_url(self) -> &'static str {
        match self {
            Provider::Anthropic => "https://api.anthropic.com",
            Provider::OpenAi => "https://api.openai.com",
        }
    }

    /// The paths a token may reach (anything else is refused: 404).
    fn allows(self, method: &hyper::Method, path: &str) -> bool {
        let post = method == hyper::Method::POST;
        match self {
            Provider::Anthropic => {
                post && matches!(path, "/v1/messages" | "/v1/messages/count_tokens")
            }
            Provider::OpenAi => {
                (post && matches!(path, "/v1/responses" | "/v1/chat/completions"))
                    || (method == hyper::Method::GET && path == "/v1/models")
            }
        }
    }
}

/// Where the gateway forwards, and with which key.
#[derive(Debug, Clone)]
pub struct Upstream {
    pub provider: Provider,
    /// Without the `/v1`: `https://api.anthropic.com`.
    pub base_url: String,
    /// The provider's key, read from the harness's environment (None for a server that
    /// needs none, e.g. a local Ollama or the tests' scripted server).
    pub key: Option<String>,
}

/// What one run's token allows.
#[derive(Debug, Clone)]
pub struct Grant {
    pub token: String,
    /// Dollars; requests are refused once the answers so far cost this much (or, with an
    /// unpriced model, once any budget is set and the cost is unknown).
    pub max_cost: Option<f64>,
    /// The model every request asks for (the agent's own choice is replaced).
    pub model: Option<String>,
}

/// The state the proxy updates and the run reads.
#[derive(Debug)]
struct Shared {
    upstream: Upstream,
    grant: Grant,
    prices: Prices,
    usage: Mutex<Usage>,
    client: reqwest::Client,
    /// With a budget: one request at a time (see proxy::forward).
    one_at_a_time: Option<Arc<tokio::sync::Semaphore>>,
}

/// A running gateway: its socket's folder (to bind-mount), and what was spent through it.
pub struct Gateway {
    dir: tempfile::TempDir,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

/// Where the socket's folder is mounted in the agent's container.
pub const CONTAINER_DIR: &str = "/run/harness-gateway";
/// The port the agent's relay listens on, inside its own sandbox.
pub const PORT: u16 = 8718;

impl Gateway {
    pub async fn start(upstream: Upstream, grant: Grant, prices: Prices) -> Result<Gateway> {
        let dir = tempfile::Builder::new()
            .prefix("harness-gateway-")
            .tempdir()
            .context("cannot make the gateway's folder")?;
        let socket = dir.path().join("socket");
        let listener = tokio::net::UnixListener::bind(&socket)
            .with_context(|| format!("{}: cannot listen", socket.display()))?;
        // The container's users connect to it: the socket is theirs to write (a token is
        // what the gateway checks); the folder holds nothing else.
        set_mode(dir.path(), 0o755)?;
        set_mode(&socket, 0o666)?;
        // No redirects: one would carry the key's header to wherever it pointed.
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(std::time::Duration::from_secs(30))
            .build()
            .context("cannot make the gateway's HTTP client")?;
        let one_at_a_time = grant
            .max_cost
            .map(|_| Arc::new(tokio::sync::Semaphore::new(1)));
        let shared = Arc::new(Shared {
            one_at_a_time,
            upstream,
            grant,
            prices,
            usage: Mutex::new(Usage::default()),
            client,
        });
        let server = tokio::spawn(proxy::serve(listener, shared.clone()));
        Ok(Gateway {
            dir,
            shared,
            server,
        })
    }

    /// The host folder holding the socket (`CONTAINER_DIR` in the container).
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("socket")
    }

    /// The environment the agent's container gets for this gateway: the token as the
    /// provider's key and the gateway's address as the provider's base URL.
    pub fn agent_env(&self) -> Vec<(String, String)> {
        let base = format!("http://127.0.0.1:{PORT}");
        let token = self.shared.grant.token.clone();
        let mut env = vec![("HARNESS_GATEWAY_PORT".to_string(), PORT.to_string())];
        match self.shared.upstream.provider {
            Provider::Anthropic => {
                env.push(("ANTHROPIC_BASE_URL".into(), base));
                env.push(("ANTHROPIC_API_KEY".into(), token));
            }
            Provider::OpenAi => {
                env.push(("OPENAI_BASE_URL".into(), format!("{base}/v1")));
                env.push(("OPENAI_API_KEY".into(), token));
            }
        }
        env
    }

    /// The provider's key the gateway adds (for the harness to keep out of what it saves).
    pub fn key(&self) -> Option<&str> {
        self.shared.upstream.key.as_deref()
    }

    /// What was spent so far; the dollars only where every answer was counted and priced.
    pub fn usage(&self) -> Usage {
        let mut u = self
            .shared
            .usage
            .lock()
            .map(|u| u.clone())
            .unwrap_or_default();
        u.cost_usd = u.known_cost();
        u
    }

    /// Stops serving; what was spent.
    pub fn stop(self) -> Usage {
        self.server.abort();
        self.usage()
    }
}

/// `url` (or a message holding it) without a user name or password in it.
pub fn shown_url(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail.find(['/', ' ', '"', ')']).unwrap_or(tail.len());
        let authority = &tail[..end];
        out.push_str(
            authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host),
        );
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

impl Drop for Gateway {
    /// A gateway dropped on an error path stops serving too (its folder goes with it).
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("{}: cannot set its mode", path.display()))
}

/// A fresh token: 32 random bytes, hex.
pub fn new_token() -> Result<String> {
    let mut bytes = [0u8; 32];
    let mut f = std::fs::File::open("/dev/urandom").context("cannot read /dev/urandom")?;
    std::io::Read::read_exact(&mut f, &mut bytes).context("cannot read /dev/urandom")?;
    Ok(format!("hgw-{}", hex::encode(bytes)))
}

/// The upstream for `provider`: `base_url` (the user's `--model-server`) or the
/// provider's own, and the key from `key_var` of this environment when it is named.
pub fn upstream(
    provider: Provider,
    base_url: Option<&str>,
    key_var: Option<&str>,
) -> Result<Upstream> {
    let key = match key_var {
        Some(var) => match std::env::var(var) {
            Ok(v) if !v.is_empty() => Some(v),
            _ if base_url.is_some() => None,
            _ => bail!(
                "the gateway needs {var} in this environment to reach {} (it stays on the \
                 host: the agent gets a token of its run)",
                provider.default_base_url()
            ),
        },
        None => None,
    };
    let base_url = base_url
        .unwrap_or(provider.default_base_url())
        .trim_end_matches('/')
        .trim_end_matches("/v1")
        .to_string();
    if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
        bail!("--model-server: {base_url:?} is not an http:// or https:// address");
    }
    Ok(Upstream {
        provider,
        base_url,
        key,
    })
}

#[cfg(test)]
mod tests;

//! `harness view [RUN_DIR]`: a run's page. Opened in the desktop's browser where there is
//! one; otherwise (a server over ssh, a container) the folder is served read-only on a local
//! address, which is printed, until Ctrl-C. Only files inside the folder are served, never
//! through a link that leaves it, each as text unless it is one of the page's own kinds.
//!
//! A results folder holds runs from elsewhere (a partition merged in, a colleague's), so a
//! served page may be hostile. Every response carries a policy ([`policy`]) that gives the
//! page an origin of its own (a sandbox without `allow-same-origin`), lets it load nothing
//! and run no script but the harness's own: no page, the harness's included, can read
//! another file of the folder. A peer is answered by its socket address, then by the Host
//! it names ([`admitted`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::store::run_folder::names;

pub struct ViewOptions {
    /// A run (or batch) folder; none: the index of every run under `results_dir`.
    pub run_dir: Option<PathBuf>,
    pub results_dir: PathBuf,
    /// Serve even where a browser could be opened.
    pub serve: bool,
    pub bind: String,
    pub port: u16,
}

pub async fn command(o: ViewOptions) -> Result<i32> {
    let (dir, page) = match &o.run_dir {
        Some(d) => (d.clone(), d.join(names::REPORT_HTML)),
        None => (
            o.results_dir.clone(),
            crate::app::index_page::write(&o.results_dir)?,
        ),
    };
    if !page.is_file() {
        bail!(
            "{}: no report.html here (is this a run folder? `harness report {}` writes it)",
            dir.display(),
            dir.display()
        );
    }
    if !o.serve
        && let Some(browser) = desktop_browser()
    {
        let status = std::process::Command::new(&browser)
            .arg(&page)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        if status.is_ok() {
            crate::outln!("opened {} with {browser}", page.display());
            return Ok(0);
        }
    }
    let name = page
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    serve(&dir, &name, &o.bind, o.port).await
}

/// The program that opens a page on this desktop: `$BROWSER`, else `xdg-open` where a
/// display is set.
fn desktop_browser() -> Option<String> {
    if let Ok(b) = std::env::var("BROWSER")
        && !b.trim().is_empty()
    {
        return Some(b);
    }
    let display = ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()));
    (display && which("xdg-open")).then(|| "xdg-open".to_string())
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(program).is_file()))
}

/// Connections answered at once; more wait for a place.
const CONNECTIONS: usize = 16;
/// How long a request may take to arrive, and a response to be taken.
const REQUEST_TIME: Duration = Duration::from_secs(10);
const RESPONSE_TIME: Duration = Duration::from_secs(120);

async fn serve(dir: &Path, page: &str, bind: &str, port: u16) -> Result<i32> {
    let root = dir
        .canonicalize()
        .with_context(|| format!("{}: cannot read", dir.display()))?;
    let listener = tokio::net::TcpListener::bind((bind, port))
        .await
        .with_context(|| format!("cannot listen on {bind}:{port}"))?;
    let addr = listener.local_addr()?;
    // Bound to an address other machines reach: the user asked for them.
    let remote = !addr.ip().to_canonical().is_loopback();
    crate::outln!(
        "serving {} at http://{addr}/{page} (Ctrl-C to stop)",
        dir.display()
    );
    if remote {
        eprintln!(
            "warning: {addr} is reachable from other machines: anyone who can reach it reads \
             every run served here (open it by the address it listens on; `ssh -L` and the \
             default 127.0.0.1 keep it to this machine)"
        );
    }
    let places = std::sync::Arc::new(tokio::sync::Semaphore::new(CONNECTIONS));
    let policy = std::sync::Arc::new(policy());
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let Ok(place) = places.clone().acquire_owned().await else { continue };
                let (root, policy) = (root.clone(), policy.clone());
                tokio::spawn(async move {
                    let served = answer(stream, &root, remote, &policy);
                    let _ = tokio::time::timeout(RESPONSE_TIME, served).await;
                    drop(place);
                });
            }
            _ = tokio::signal::ctrl_c() => return Ok(0),
        }
    }
}

/// What every response carries: the page gets a sandbox of its own (an opaque origin, so
/// nothing else served here is same-origin with it), may fetch, frame, embed, submit or
/// load nothing (images only from `data:`), and may run only the harness's own script,
/// allowed by its hash: a page the harness did not write runs no script at all.
pub fn policy() -> String {
    format!(
        "sandbox allow-scripts; default-src 'none'; script-src {}; style-src 'unsafe-inline'; \
         img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        crate::app::export::html::script_source_hash()
    )
}

/// Why a request is not answered: its status and the text said.
type Refusal = (&'static str, &'static str);

/// Whether a request from `peer`, which reached this server at `local` naming `host`, is
/// answered. A peer on another machine only when the server was bound to an address other
/// machines reach (`remote`); a bind to a loopback address serves this machine alone,
/// whatever a request says. Then the Host must name the address the connection reached,
/// or, from this machine, `localhost` or `127.0.0.1`: a web page elsewhere cannot read the
/// folder through a host name it points here (DNS rebinding).
fn admitted(
    peer: std::net::SocketAddr,
    local: std::net::SocketAddr,
    host: Option<&str>,
    remote: bool,
) -> Result<(), Refusal> {
    let from_here = peer.ip().to_canonical().is_loopback();
    if !from_here && !remote {
        return Err((
            "403 Forbidden",
            "this server answers only this machine (it listens on a loopback address)\n",
        ));
    }
    let port = local.port();
    let mut names = vec![format!("{}:{port}", ip_literal(local.ip()))];
    if from_here {
        names.extend(["localhost", "127.0.0.1", "[::1]"].map(|h| format!("{h}:{port}")));
    }
    match host {
        Some(h) if names.iter().any(|n| n == h) => Ok(()),
        _ => Err((
            "421 Misdirected Request",
            "this server answers only to the address it listens on (and, from this machine, \
             to 127.0.0.1 and localhost)\n",
        )),
    }
}

/// An address as a Host header writes it: IPv4 (also one mapped into IPv6) as itself,
/// IPv6 in brackets.
fn ip_literal(ip: std::net::IpAddr) -> String {
    match ip.to_canonical() {
        std::net::IpAddr::V4(v4) => v4.to_string(),
        std::net::IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

/// The request line and the Host header of a request's head (its lines up to the blank
/// one); no Host when there is none or more than one.
fn request_of(head: &[u8]) -> (String, String, Option<String>) {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n").take_while(|l| !l.is_empty());
    let first = lines.next().unwrap_or("");
    let mut words = first.split_whitespace();
    let method = words.next().unwrap_or("").to_string();
    let target = words.next().unwrap_or("/").to_string();
    let hosts: Vec<String> = lines
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("host")
                .then(|| v.trim().to_ascii_lowercase())
        })
        .collect();
    let host = match hosts.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    };
    (method, target, host)
}

/// The request's head (up to its blank line, at most 8 KiB), read within REQUEST_TIME.
async fn read_head(stream: &mut tokio::net::TcpStream) -> Vec<u8> {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    let reading = async {
        while head.len() < 8192 && !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
    };
    let _ = tokio::time::timeout(REQUEST_TIME, reading).await;
    head
}

/// One request: GET or HEAD of a file inside `root`, streamed, or an error status.
async fn answer(
    mut stream: tokio::net::TcpStream,
    root: &Path,
    remote: bool,
    policy: &str,
) -> std::io::Result<()> {
    let (peer, local) = (stream.peer_addr()?, stream.local_addr()?);
    let head = read_head(&mut stream).await;
    let (method, target, host) = request_of(&head);
    let refuse = |(code, why): Refusal| (code, "text/plain", Err(why));
    let (code, kind, body) = if let Err(refusal) = admitted(peer, local, host.as_deref(), remote) {
        refuse(refusal)
    } else if !matches!(method.as_str(), "GET" | "HEAD") {
        refuse(("405 Method Not Allowed", "GET only\n"))
    } else {
        match file_of(root, &target) {
            Some(path) => match tokio::fs::File::open(&path).await {
                Ok(file) => ("200 OK", content_type(root, &path), Ok(file)),
                Err(_) => refuse(("404 Not Found", "not found\n")),
            },
            None => refuse(("404 Not Found", "not found\n")),
        }
    };
    let length = match &body {
        Ok(file) => file.metadata().await.map(|m| m.len()).unwrap_or(0),
        Err(text) => text.len() as u64,
    };
    let header = format!(
        "HTTP/1.1 {code}\r\nContent-Type: {kind}\r\nContent-Length: {length}\r\n\
         Content-Security-Policy: {policy}\r\nCross-Origin-Resource-Policy: same-origin\r\n\
         Referrer-Policy: no-referrer\r\nX-Content-Type-Options: nosniff\r\n\
         Connection: close\r\n\r\n"
    );
    stream.write_all(header.as_bytes()).await?;
    if method != "HEAD" {
        match body {
            // Streamed: a client that takes its time holds a few KiB, not the file.
            Ok(mut file) => {
                tokio::io::copy(&mut file, &mut stream).await?;
            }
            Err(text) => stream.write_all(text.as_bytes()).await?,
        }
    }
    stream.shutdown().await
}

/// The file a request names, when it is a file inside `root` (after every link is
/// followed); `/` is the page.
fn file_of(root: &Path, target: &str) -> Option<PathBuf> {
    let path = target.split(['?', '#']).next().unwrap_or("/");
    let path = percent_decode(path.trim_start_matches('/'))?;
    let path = if path.is_empty() {
        names::REPORT_HTML.to_string()
    } else {
        path
    };
    let full = root.join(&path).canonicalize().ok()?;
    (full.starts_with(root) && full.is_file()).then_some(full)
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok().filter(|p| !p.contains('\0'))
}

/// The harness's own pages and their images as themselves; everything else (logs,
/// patches, JSON a container's output fills) as plain text, never as a page.
fn content_type(root: &Path, path: &Path) -> &'static str {
    match path.extension().and_then(|x| x.to_str()) {
        Some("html") if is_page(root, path) => "text/html; charset=utf-8",
        Some("png") => "image/png",
        Some("json") => "application/json",
        _ => "text/plain; charset=utf-8",
    }
}

/// The pages the harness writes: the index and its comparisons at the served folder's
/// root, and `report.html` beside a run.json or batch.json (a run or batch folder).
fn is_page(root: &Path, path: &Path) -> bool {
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let folder = path.parent().unwrap_or(root);
    if folder == root && (name == "index.html" || name.starts_with("compare-")) {
        return true;
    }
    name == names::REPORT_HTML
        && (folder.join(names::RUN_JSON).is_file() || folder.join("batch.json").is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_files_inside_the_folder_are_served() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("run");
        std::fs::create_dir_all(root.join("m/t/0")).unwrap();
        std::fs::write(root.join("report.html"), "<p>").unwrap();
        std::fs::write(root.join("m/t/0/apply.log"), "x").unwrap();
        std::fs::write(d.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(d.path().join("secret"), root.join("link")).unwrap();
        let root = root.canonicalize().unwrap();
        assert_eq!(file_of(&root, "/"), Some(root.join("report.html")));
        assert_eq!(
            file_of(&root, "/m/t/0/apply.log?x#y"),
            Some(root.join("m/t/0/apply.log"))
        );
        for outside in [
            "/../secret",
            "/%2e%2e/secret",
            "/link",
            "/m",
            "/nope",
            "/%zz",
        ] {
            assert_eq!(file_of(&root, outside), None, "{outside}");
        }
        let html = "text/html; charset=utf-8";
        // A page only where the harness writes one: the index at the root, a run's report
        // beside its run.json; an HTML file anywhere else is text.
        std::fs::write(root.join("index.html"), "<p>").unwrap();
        std::fs::write(root.join("m/t/0/report.html"), "<script>").unwrap();
        assert_eq!(content_type(&root, &root.join("index.html")), html);
        assert_eq!(
            content_type(&root, &root.join("report.html")),
            "text/plain; charset=utf-8"
        );
        std::fs::write(root.join("run.json"), "{}").unwrap();
        assert_eq!(content_type(&root, &root.join("report.html")), html);
        for text in ["m/t/0/apply.log", "m/t/0/other.html", "m/t/0/report.html"] {
            assert_eq!(
                content_type(&root, &root.join(text)),
                "text/plain; charset=utf-8",
                "{text}"
            );
        }
    }

    /// A request in pieces is read whole; one addressed to another host name is refused
    /// (DNS rebinding); a file is streamed; every answer carries the policy.
    #[tokio::test]
    async fn the_server_answers_its_own_host_only() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("run.json"), "{}").unwrap();
        std::fs::write(d.path().join("report.html"), "<p>page</p>").unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let root = d.path().canonicalize().unwrap();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = answer(stream, &root, false, &policy()).await;
            }
        });
        let ask = |parts: Vec<String>| async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            for p in parts {
                s.write_all(p.as_bytes()).await.unwrap();
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let mut out = String::new();
            s.read_to_string(&mut out).await.unwrap();
            out
        };
        let ok = ask(vec![
            "GET /report.html HTTP/1.1\r\n".into(),
            format!("Host: 127.0.0.1:{}\r\n\r\n", addr.port()),
        ])
        .await;
        assert!(
            ok.starts_with("HTTP/1.1 200") && ok.ends_with("<p>page</p>"),
            "{ok}"
        );
        let csp = format!("\r\nContent-Security-Policy: {}\r\n", policy());
        assert!(ok.contains(&csp), "{ok}");
        for (host, code) in [
            (format!("Host: attacker.example:{}\r\n", addr.port()), "421"),
            (String::new(), "421"),
            (
                format!(
                    "Host: 127.0.0.1:{0}\r\nHost: attacker.example:{0}\r\n",
                    addr.port()
                ),
                "421",
            ),
        ] {
            let other = ask(vec![format!("GET /report.html HTTP/1.1\r\n{host}\r\n")]).await;
            assert!(other.starts_with(&format!("HTTP/1.1 {code}")), "{other}");
            assert!(!other.contains("page") && other.contains(&csp), "{other}");
        }
    }

    #[test]
    fn the_policy_sandboxes_every_page_and_allows_only_the_harness_script() {
        let p = policy();
        for part in [
            "sandbox allow-scripts;",
            "default-src 'none';",
            "base-uri 'none';",
            "form-action 'none';",
        ] {
            assert!(p.contains(part), "{p}");
        }
        assert!(!p.contains("allow-same-origin"), "{p}");
        let script = p
            .split("script-src ")
            .nth(1)
            .and_then(|r| r.split(';').next());
        assert_eq!(
            script,
            Some(crate::app::export::html::script_source_hash().as_str())
        );
    }

    /// A peer is answered by its address first: a bind to loopback serves this machine
    /// only, whatever Host it sends; a bind other machines reach serves them by the address
    /// they reached, never by a loopback name.
    #[test]
    fn a_peer_is_admitted_by_its_address_then_by_the_host_it_names() {
        let sock = |s: &str| s.parse::<std::net::SocketAddr>().unwrap();
        let here = sock("127.0.0.1:8000");
        let lan = sock("192.0.2.1:8000");
        let stranger = sock("192.0.2.7:40000");
        let loop_peer = sock("127.0.0.1:40000");
        let code = |r: Result<(), Refusal>| r.err().map(|(c, _)| &c[..3]);
        // Bound to loopback.
        for host in ["127.0.0.1:8000", "localhost:8000", "[::1]:8000"] {
            assert_eq!(
                code(admitted(loop_peer, here, Some(host), false)),
                None,
                "{host}"
            );
            assert_eq!(
                code(admitted(stranger, here, Some(host), false)),
                Some("403")
            );
        }
        for host in [Some("attacker.example:8000"), Some("127.0.0.1:8001"), None] {
            assert_eq!(code(admitted(loop_peer, here, host, false)), Some("421"));
        }
        // Bound to an address other machines reach (the case: a peer elsewhere
        // naming 127.0.0.1 is refused).
        assert_eq!(
            code(admitted(stranger, lan, Some("192.0.2.1:8000"), true)),
            None
        );
        for host in ["127.0.0.1:8000", "localhost:8000", "attacker.example:8000"] {
            assert_eq!(code(admitted(stranger, lan, Some(host), true)), Some("421"));
        }
        assert_eq!(
            code(admitted(loop_peer, here, Some("localhost:8000"), true)),
            None
        );
        // An IPv4 peer on a dual-stack socket is the same peer.
        let mapped = sock("[::ffff:127.0.0.1]:40000");
        let mapped_here = sock("[::ffff:127.0.0.1]:8000");
        assert_eq!(
            code(admitted(mapped, mapped_here, Some("127.0.0.1:8000"), false)),
            None
        );
        let v6 = sock("[2001:db8::1]:8000");
        assert_eq!(
            code(admitted(stranger, v6, Some("[2001:db8::1]:8000"), true)),
            None
        );
    }

    #[test]
    fn only_the_head_and_exactly_one_host_count() {
        let (m, t, h) = request_of(b"GET /a?b HTTP/1.1\r\nHOST:  LocalHost:1 \r\n\r\n");
        assert_eq!(
            (m.as_str(), t.as_str(), h.as_deref()),
            ("GET", "/a?b", Some("localhost:1"))
        );
        let (_, _, h) = request_of(b"GET / HTTP/1.1\r\nX: y\r\n\r\nHost: localhost:1\r\n");
        assert_eq!(h, None, "a Host line after the head is body");
        let (_, _, h) = request_of(b"GET / HTTP/1.1\r\nHost: a:1\r\nHost: a:1\r\n\r\n");
        assert_eq!(h, None);
        let (m, t, h) = request_of(b"");
        assert_eq!((m.as_str(), t.as_str(), h), ("", "/", None));
    }
}

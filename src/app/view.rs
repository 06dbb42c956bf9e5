//! `harness view [RUN_DIR]`: a run's page. Opened in the desktop's browser where there is
//! one; otherwise (a server over ssh, a container) the folder is served read-only on a local
//! address, which is printed, until Ctrl-C. Only files inside the folder are served, never
//! through a link that leaves it, each as text unless it is one of the page's own kinds.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::core::results::names;

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

async fn serve(dir: &Path, page: &str, bind: &str, port: u16) -> Result<i32> {
    let root = dir
        .canonicalize()
        .with_context(|| format!("{}: cannot read", dir.display()))?;
    let listener = tokio::net::TcpListener::bind((bind, port))
        .await
        .with_context(|| format!("cannot listen on {bind}:{port}"))?;
    let addr = listener.local_addr()?;
    crate::outln!(
        "serving {} at http://{addr}/{page} (no browser here to open it; Ctrl-C to stop)",
        dir.display()
    );
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let root = root.clone();
                tokio::spawn(async move {
                    let _ = answer(stream, &root).await;
                });
            }
            _ = tokio::signal::ctrl_c() => return Ok(0),
        }
    }
}

/// One request: GET of a file inside `root`, or an error status.
async fn answer(mut stream: tokio::net::TcpStream, root: &Path) -> std::io::Result<()> {
    let mut head = vec![0u8; 8192];
    let n = tokio::time::timeout(std::time::Duration::from_secs(10), stream.read(&mut head))
        .await
        .unwrap_or(Ok(0))?;
    let request = String::from_utf8_lossy(&head[..n]);
    let mut words = request.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or("/"));
    let (code, kind, body) = match (method, file_of(root, target)) {
        ("GET" | "HEAD", Some(path)) => match tokio::fs::read(&path).await {
            Ok(bytes) => ("200 OK", content_type(&path), bytes),
            Err(_) => ("404 Not Found", "text/plain", b"not found\n".to_vec()),
        },
        ("GET" | "HEAD", None) => ("404 Not Found", "text/plain", b"not found\n".to_vec()),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            b"GET only\n".to_vec(),
        ),
    };
    let header = format!(
        "HTTP/1.1 {code}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\
         X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(header.as_bytes()).await?;
    if method != "HEAD" {
        stream.write_all(&body).await?;
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

/// The page and its images as themselves; everything else (logs, patches, JSON a
/// container's output fills) as plain text, never as a page.
fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|x| x.to_str()) {
        // The harness's own pages: a run's, the index and its comparisons.
        Some("html") if is_page(path) => "text/html; charset=utf-8",
        Some("png") => "image/png",
        Some("svg") => "text/plain; charset=utf-8",
        Some("json") => "application/json",
        _ => "text/plain; charset=utf-8",
    }
}

fn is_page(path: &Path) -> bool {
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    name == names::REPORT_HTML
        || name == "index.html"
        || (name.starts_with("compare-") && name.ends_with(".html"))
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
        assert_eq!(
            content_type(&root.join("m/t/0/apply.log")),
            "text/plain; charset=utf-8"
        );
        assert_eq!(
            content_type(&root.join("m/t/0/other.html")),
            "text/plain; charset=utf-8"
        );
    }
}
